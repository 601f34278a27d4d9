"""PyTorch pipelining `compute_only` CSV (docs/formats.md, "PyTorch CSV"), read by `_PipelineScheduleRuntime._load_csv`.

One row per rank, its actions in execution order: `<global stage><type><microbatch>` with
F forward, I input gradient (our B), W weight gradient, B full backward (our BW); an
overlapped pair is `(aFi;bBj)OVERLAP_F_B`. Only one-pipe placements have a torch form.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from zbsolve.errors import ExportError, MissingFileError, ScheduleError, ScheduleFileError
from zbsolve.formats.atomic_files import write_atomic
from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import TABLE
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate

TORCH_KIND = {row.kind.value: row.torch for row in TABLE.values() if row.torch}  # F, I, W, B
OUR_KIND = {torch: ours for ours, torch in TORCH_KIND.items()}
_LETTERS = "".join(TORCH_KIND.values())
# ASCII digits only: \d also takes other scripts' digits, which int() then reads as numbers.
_ACTION = re.compile(rf"([0-9]+)([{_LETTERS}])([0-9]+)")
_PAIR = re.compile(rf"\(([0-9]+[{_LETTERS}][0-9]+);([0-9]+[{_LETTERS}][0-9]+)\)OVERLAP_F_B")
_MOST_DIGITS = 9  # no problem has a billion stages or microbatches


def action(op: Op) -> str:
    if op.kind not in TORCH_KIND:
        raise ExportError(f"torch's schedule CSV has no action for {op.describe()}")
    return f"{op.stage}{TORCH_KIND[op.kind]}{op.microbatch}"


def check_torch_form(problem: Problem) -> None:
    """Refuse, before any solving, a problem whose schedules have no torch form."""
    if len(problem.pipes) != 1:
        raise ExportError(
            "torch pipelining runs one pipe of stages; this problem has "
            f"{len(problem.pipes)} pipes (bidirectional/DualPipe has no torch form; "
            "DualPipeV on the vshape placement does)"
        )


def recomputed(schedule: Schedule) -> list[tuple[int, int]]:
    """(stage, microbatch) of every recomputation (R op) of a one-pipe schedule."""
    return sorted((t.op.stage, t.op.microbatch) for ops in schedule.devices for t in ops if t.op.kind == "R")


def offloaded(schedule: Schedule) -> list[tuple[int, int]]:
    """(stage, microbatch) of every offloaded activation (O op) of a one-pipe schedule."""
    return sorted((t.op.stage, t.op.microbatch) for ops in schedule.devices for t in ops if t.op.kind == "O")


def torch_rows(schedule: Schedule, recompute_in_backward: bool = False) -> list[list[str]]:
    """The CSV's rows. torch has no action for recomputation or host copies: a schedule with
    FC, R, FO, O or L ops is refused, unless `recompute_in_backward`: then FC and FO are
    written as F and R, O and L left out, for a runtime that recomputes those microbatches
    inside their backward (`recomputed` lists them) or copies the others itself (`offloaded`)."""
    check_torch_form(schedule.problem)
    rows = []
    for slots in schedule.order():
        row = []
        for slot in slots:
            if recompute_in_backward and slot[0].kind in ("R", "O", "L"):
                continue
            if recompute_in_backward and slot[0].kind in ("FC", "FO"):
                row.append(action(slot[0].with_kind("F")))
            elif len(slot) == 1:
                row.append(action(slot[0]))
            else:
                forward, backward = sorted(slot, key=lambda op: op.kind != "F")
                row.append(f"({action(forward)};{action(backward)})OVERLAP_F_B")
        rows.append(row)
    return rows


def torch_csv(schedule: Schedule, recompute_in_backward: bool = False) -> str:
    return "".join(",".join(row) + "\n" for row in torch_rows(schedule, recompute_in_backward))


def write_torch_csv(schedule: Schedule, path: str | os.PathLike) -> str | None:
    """Write the CSV. A schedule that recomputes or offloads is written with FC and FO as F and
    R, O and L left out, and what the CSV cannot carry (which microbatches recompute or go to
    host at which stage, and where the plan put each R and copy) goes beside it in
    PATH.recompute.json and PATH.offload.json; returns a note saying so, else None."""
    chosen, sent = recomputed(schedule), offloaded(schedule)
    write_atomic(path, torch_csv(schedule, recompute_in_backward=bool(chosen or sent)))
    notes = []
    places = {(t.op.kind, t.op.stage, t.op.microbatch): t.start for ops in schedule.devices for t in ops}
    if chosen:
        beside = f"{os.fspath(path)}.recompute.json"
        write_atomic(beside, json.dumps({
            "about": "torch's compute_only CSV has no action for recomputation: these forwards are written as F, "
                     "their R left out; zbsolve run recomputes them inside their backward (activation checkpointing)",
            "recompute": [{"stage": k, "microbatch": i, "planned_start": places["R", k, i]} for k, i in chosen],
        }, indent=1) + "\n")
        notes.append(f"torch's CSV has no action for recomputation: {len(chosen)} forwards written as F and their "
                     f"R's left out; which ones, and where the plan runs each R, are in {beside}")
    if sent:
        beside = f"{os.fspath(path)}.offload.json"
        write_atomic(beside, json.dumps({
            "about": "torch's compute_only CSV has no action for host copies: these forwards are written as F, "
                     "their copies to host (O) and back (L) left out; a runtime that offloads copies each "
                     "activation to host after its forward and back before its backward, as planned here",
            "offload": [{"stage": k, "microbatch": i, "planned_to_host": places["O", k, i],
                         "planned_back": places["L", k, i]} for k, i in sent],
        }, indent=1) + "\n")
        notes.append(f"torch's CSV has no action for host copies: {len(sent)} forwards written as F and their "
                     f"copies left out; which ones, and when the plan copies each, are in {beside}")
    return "; ".join(notes) or None


def read_torch_csv(path: str | os.PathLike, problem: Problem) -> Schedule:
    """A compute_only CSV (one row per rank, as torch's generators and `zbsolve export` write
    it) timed on `problem`: the row's order on each rank, every op as early as it can start.
    A CSV that does not match the problem is refused naming the row and action."""
    check_torch_form(problem)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark (spreadsheets write one) skipped
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ScheduleFileError(f"{path}: cannot read: {error}") from None
    rows = [line.strip() for line in text.splitlines()]
    while rows and not rows[-1]:
        rows.pop()
    if len(rows) != problem.devices:
        raise ScheduleFileError(f"{path}: {len(rows)} rows, one per rank expected ({problem.devices})")
    seen: dict[Op, tuple[int, str]] = {}
    orders: list[list[tuple[Op, ...]]] = []
    for rank, row in enumerate(rows):
        slots = []
        for token in (t.strip() for t in row.split(",")):
            if not token:
                continue
            where = f"{path}: row {rank + 1}, action {token!r}"
            pair = _PAIR.fullmatch(token)
            parts = pair.groups() if pair else (token,)
            slot = tuple(_op(part, where, problem, rank) for part in parts)
            for op in slot:
                if op in seen:
                    raise ScheduleFileError(f"{where}: {op.describe()} is already in row {seen[op][0] + 1} "
                                            f"({seen[op][1]!r})")
                seen[op] = (rank, token)
            slots.append(slot)
        orders.append(slots)
    _check_complete(path, problem, seen)
    try:
        return simulate(problem, orders, Path(path).stem)
    except ScheduleError as error:
        raise ScheduleFileError(f"{path}: {error}") from None


def _op(text: str, where: str, problem: Problem, rank: int) -> Op:
    match = _ACTION.fullmatch(text)
    if not match:
        raise ScheduleFileError(f"{where}: not a compute action (<stage><F|I|W|B><microbatch>; a compute_only "
                                "CSV holds no communication actions)")
    if max(len(match.group(1)), len(match.group(3))) > _MOST_DIGITS:
        raise ScheduleFileError(f"{where}: a stage or microbatch number of over {_MOST_DIGITS} digits")
    stage, kind, microbatch = int(match.group(1)), OUR_KIND[match.group(2)], int(match.group(3))
    pipe = problem.pipes[0]
    if stage >= len(pipe.stages):
        raise ScheduleFileError(f"{where}: stage {stage}, but the problem has stages 0-{len(pipe.stages) - 1} "
                                f"({problem.placement} on {problem.devices} ranks)")
    if microbatch not in pipe.microbatches:
        raise ScheduleFileError(f"{where}: microbatch {microbatch}, but the problem has microbatches "
                                f"0-{problem.microbatches - 1}")
    if pipe.stages[stage].device != rank:
        raise ScheduleFileError(f"{where}: stage {stage} runs on rank {pipe.stages[stage].device} in this "
                                f"problem ({problem.placement}), not on rank {rank}")
    if TABLE[kind].split_only and not problem.split_backward:
        raise ScheduleFileError(f"{where}: a split backward ({match.group(2)}), but the problem's backward is fused")
    return Op(kind, 0, stage, microbatch)


def _check_complete(path: str | os.PathLike, problem: Problem, seen: dict[Op, tuple[int, str]]) -> None:
    """Every forward once, and every backward once, fused (B) or split (I and W)."""
    for stage, placed in enumerate(problem.pipes[0].stages):
        row = placed.device + 1
        for i in problem.pipes[0].microbatches:
            missing = None
            if Op("F", 0, stage, i) not in seen:
                missing = action(Op("F", 0, stage, i))
            elif Op("BW", 0, stage, i) not in seen:
                split = [Op(kind, 0, stage, i) in seen for kind in ("B", "W")]
                if not all(split):
                    missing = " and ".join(action(Op(k, 0, stage, i)) for k, there in zip("BW", split) if not there)
                    if not any(split):
                        missing = f"{stage}B{i} (or {stage}I{i} and {stage}W{i})"
            elif any(Op(kind, 0, stage, i) in seen for kind in ("B", "W")):
                raise ScheduleFileError(f"{path}: row {row} has {stage}B{i} and also a split part of it "
                                        f"({stage}I{i} or {stage}W{i})")
            if missing:
                raise ScheduleFileError(f"{path}: row {row} lacks {missing}")
