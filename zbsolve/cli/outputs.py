"""What the solve, compare and baseline commands share: the problem's one-line description,
the comparison table, and the output files (checked before any work, written after)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

from zbsolve.baselines import applicable, left_out, run_baseline
from zbsolve.baselines.reference import one_f_one_b_as_run, one_f_one_b_reference
from zbsolve.errors import UsageError
from zbsolve.formats.atomic_files import check_separate, check_writable, write_atomic
from zbsolve.formats.schedule_json import write_schedule
from zbsolve.formats.torch_csv import check_torch_form, write_torch_csv
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.validator import validate
from zbsolve.solvers import lower_bound, with_bound

from .inputs import read_for
from .table import comparison_table, table_records


def describe_problem(problem: Problem, placement_text: str | None = None) -> str:
    costs = problem.stage_costs
    uniform = all(c == costs[0] for c in costs)
    c = costs[0]
    cost_text = (
        f"F={c.F:g} B={c.B:g} W={c.W:g}{'' if c.fused is None else f' BW={c.fused:g}'} activation={c.activation:g} "
        f"residual={c.residual:g} per stage"
        if uniform and problem.partition is None
        else f"layers per stage {','.join(map(str, problem.partition))}" if problem.partition is not None
        else f"{len(costs)} per-stage cost records"
    )
    if problem.memory_limit is None:
        memory = "memory unlimited"
    else:
        limit = max(problem.memory_limit)
        unit, name = problem.one_f_one_b_peak(), f" {problem.memory_unit_name}" if problem.memory_unit_name else ""
        relative = f"{limit / unit:.3g}x U, U={unit:g}{name}" if unit else "U=0: no activation"
        if len(set(problem.memory_limit)) == 1:
            memory = f"memory limit {limit:g}{name} ({relative})"
        else:
            per_device = ", ".join(f"{m:.4g}" for m in problem.memory_limit)
            memory = f"memory limits {per_device}{name} per device (the largest {relative})"
    overlap = "" if problem.fb_overlap is None else f", F&B overlap {problem.fb_overlap:g}"
    if "recompute" in problem.levers:
        overlap += (f", levers recompute (R={c.recompute_time:g} checkpoint={c.checkpoint:g} per stage)" if uniform
                    else ", levers recompute")
    if "offload" in problem.levers:
        overlap += (f", levers offload (copy {c.offload:g} {problem.time_unit} each way per stage)" if uniform
                    else ", levers offload")
    return (
        f"P={problem.devices} M={problem.microbatches} {placement_text or 'placement ' + problem.placement}, "
        f"{cost_text}, comm {problem.comm:g} {problem.time_unit}, {memory}{overlap}, objective {problem.objective}"
        + ("" if problem.split_backward or placement_text else ", backward fused")
    )


def write_outputs(schedule: Schedule, args: argparse.Namespace) -> None:
    validate(schedule)
    if getattr(args, "output", None):
        write_schedule(schedule, args.output)
        print(f"wrote {args.output}")
    if getattr(args, "torch_csv", None):
        note = write_torch_csv(schedule, args.torch_csv)
        print(f"wrote {args.torch_csv}")
        if note:
            sys.stderr.write(f"zbsolve: note: {note}\n")
    if getattr(args, "plot", None):
        from zbsolve.plots.schedule_plot import plot

        plot(schedule, args.plot, reference=one_f_one_b_as_run(schedule.problem))
        print(f"wrote {args.plot}")


def requested_outputs(args: argparse.Namespace) -> dict[str, str | None]:
    """The output files a command was asked for, by option (None where not given)."""
    return {"-o": getattr(args, "output", None), "--torch-csv": getattr(args, "torch_csv", None),
            "--plot": getattr(args, "plot", None)}


def check_outputs(args: argparse.Namespace, problem: Problem) -> None:
    """Every output can be written, before any work (a solve may take minutes)."""
    if getattr(args, "torch_csv", None):
        check_torch_form(problem)
    outputs = requested_outputs(args)
    check_separate({"--profile": getattr(args, "profile", None)}, outputs)
    for path in outputs.values():
        if path is not None:  # an empty name is refused, not taken as no file
            check_writable(path)
    if getattr(args, "plot", None):
        from zbsolve.plots.schedule_plot import check_plot_path

        check_plot_path(args.plot)


def baseline_rows(problem: Problem) -> list[Schedule]:
    graph = OpGraph(problem)
    return [run_baseline(name, problem, graph) for name in applicable(problem)]


def reference_of(problem: Problem, timed: list[Schedule]) -> Schedule | None:
    """1F1B on the single chain: on the single placement, the problem's own 1F1B row."""
    if problem.placement == "single":
        own = [s for s in timed if s.name == "1f1b"]
        if own:
            return own[0]
    return one_f_one_b_reference(problem)


def bounded_rows(problem: Problem, solved: list[Schedule], timed: list[Schedule]) -> tuple[list[Schedule], float]:
    """The solved rows, then the hand-made ones with the problem's bound and their gap to it;
    and that bound."""
    # A solved row's bound is already at least lower_bound(problem): compute it only without one.
    proven = [s.solver.bound for s in solved if s.solver.bound is not None]
    bound = max(proven) if proven else lower_bound(problem)
    # How far each fitting schedule is from the best possible (the bound holds within the limit only).
    return solved + [s if s.over_memory_limit() else with_bound(s, bound) for s in timed], bound


def print_comparison(command: str, problem: Problem, solved: list[Schedule],
                     timed: list[Schedule]) -> tuple[list[Schedule], Schedule | None]:
    """The table: solved rows, then every applicable baseline (`timed`, from `baseline_rows`,
    as for the solve's start), speed-ups against 1F1B; on stderr, why a baseline made for
    this placement is not in it. Returns the rows and the reference."""
    reference = reference_of(problem, timed)
    rows, _ = bounded_rows(problem, solved, timed)
    if problem.placement != "single" and reference is not None:
        rows.insert(len(solved), reference.with_solver(reference.solver, name="1f1b (single chain)"))
    print(describe_problem(problem))
    print(comparison_table(rows, reference))
    for line in [per_device_memory(s) for s in solved] + [fused_one_f_one_b(reference, solved)]:
        if line:
            print(line)
    for name, reason in left_out(problem):
        print(f"zbsolve {command}: note: {name} is not in the table: it {reason}", file=sys.stderr)
    return rows, reference


def per_device_memory(schedule: Schedule) -> str | None:
    """Each device's peak against its own limit, a line, where the limits differ by device."""
    limits = schedule.problem.memory_limit
    if limits is None or len(set(limits)) == 1:
        return None
    unit = f" ({schedule.problem.memory_unit_name})" if schedule.problem.memory_unit_name else ""
    pairs = ", ".join(f"{p:.4g}/{limit:.4g}" for p, limit in zip(schedule.metrics.peak_memory, limits))
    return f"{schedule.name}: peak memory per device against its own limit{unit}: {pairs}"


def fused_one_f_one_b(reference: Schedule | None, solved: list[Schedule]) -> str | None:
    """Where the costs give a fused backward its own time (BW) and the problem splits B and
    W, the table times every BW as B + W (so that its bounds hold for every schedule); say
    what 1F1B takes with the fused backward, which a runtime that fuses it runs, and when
    that beats the solve, how to solve with it."""
    if reference is None:
        return None
    problem = reference.problem
    if not problem.split_backward or all(c.fused is None for c in problem.stage_costs):
        return None
    fused = run_baseline("1f1b", replace(problem, split_backward=False)).metrics.makespan
    unit = problem.time_unit
    text = (f"1F1B with the costs' own fused backward (BW, as --no-split-backward times it) takes {fused:.6g} {unit} "
            f"against {reference.metrics.makespan:.6g} {unit} above, where BW is B + W")
    if any(fused < s.metrics.makespan for s in solved) and problem.objective == "makespan":
        text += "; that is faster than the solve: solve with --no-split-backward"
    return text


def given_rows(paths: list[str] | None, args: argparse.Namespace, problem: Problem, command: str) -> list[Schedule]:
    """Schedules the user gives (JSON or torch CSV) as rows of the table, named by their file,
    each validated on the problem; a solve may start from those within the memory limit."""
    rows = []
    for path in paths or []:
        schedule = read_for(path, args, problem)
        validate(schedule)
        if schedule.over_memory_limit():
            print(f"zbsolve {command}: note: {path} breaks the memory limit: shown, but no solve starts from it",
                  file=sys.stderr)
        rows.append(replace(schedule, name=Path(path).name))
    return rows


def check_compare_outputs(args: argparse.Namespace) -> None:
    """`compare -o DIR` and `--table FILE`, refused before any work when they cannot be written."""
    if args.output_dir:
        folder = Path(args.output_dir)
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"-o {args.output_dir}: not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        check_writable(folder / "probe.json")
    if args.table:
        if Path(args.table).suffix.lower() not in (".csv", ".json"):
            raise UsageError(f"--table must end in .csv or .json, got {args.table!r}")
        check_writable(args.table)


def write_compare_outputs(args: argparse.Namespace, rows: list[Schedule], reference: Schedule | None) -> None:
    """Each schedule that keeps the memory limit as FOLDER/NAME.json; the table as CSV or JSON."""
    if args.output_dir:
        for s in rows:
            name = re.sub(r"[^A-Za-z0-9.-]+", "_", s.name).strip("_") or "schedule"
            if s.over_memory_limit():
                print(f"zbsolve compare: note: {s.name} is not written: it breaks the memory limit", file=sys.stderr)
                continue
            validate(s)
            write_schedule(s, Path(args.output_dir) / f"{name}.json")
        print(f"wrote the schedules to {args.output_dir}")
    if args.table:
        records = table_records(rows, reference)
        if args.table.lower().endswith(".json"):
            text = json.dumps(records, indent=1) + "\n"
        else:
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows({**r, "peak_memory": " ".join(f"{v:g}" for v in r["peak_memory"])} for r in records)
            text = out.getvalue()
        write_atomic(args.table, text)
        print(f"wrote {args.table}")
