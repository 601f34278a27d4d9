"""PyTorch pipelining `compute_only` CSV (docs/formats.md, "PyTorch CSV"), read by `_PipelineScheduleRuntime._load_csv`.

One row per rank, its actions in execution order: `<global stage><type><microbatch>` with
F forward, I input gradient (our B), W weight gradient, B full backward (our BW); an
overlapped pair is `(aFi;bBj)OVERLAP_F_B`. Only one-pipe placements have a torch form.
"""

from __future__ import annotations

import os

from zbsolve.errors import ExportError
from zbsolve.formats.atomic_files import write_atomic
from zbsolve.problem.op_graph import Op
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule

TORCH_KIND = {"F": "F", "B": "I", "W": "W", "BW": "B"}


def action(op: Op) -> str:
    return f"{op.stage}{TORCH_KIND[op.kind]}{op.microbatch}"


def check_torch_form(problem: Problem) -> None:
    """Refuse, before any solving, a problem whose schedules have no torch form."""
    if len(problem.pipes) != 1:
        raise ExportError(
            "torch pipelining runs one pipe of stages; this problem has "
            f"{len(problem.pipes)} pipes (bidirectional/DualPipe has no torch form; "
            "DualPipeV on the vshape placement does)"
        )


def torch_rows(schedule: Schedule) -> list[list[str]]:
    check_torch_form(schedule.problem)
    rows = []
    for slots in schedule.order():
        row = []
        for slot in slots:
            if len(slot) == 1:
                row.append(action(slot[0]))
            else:
                forward, backward = sorted(slot, key=lambda op: op.kind != "F")
                row.append(f"({action(forward)};{action(backward)})OVERLAP_F_B")
        rows.append(row)
    return rows


def torch_csv(schedule: Schedule) -> str:
    return "".join(",".join(row) + "\n" for row in torch_rows(schedule))


def write_torch_csv(schedule: Schedule, path: str | os.PathLike) -> None:
    write_atomic(path, torch_csv(schedule))
