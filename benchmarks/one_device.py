"""How far reasoning about one device, or a few together, can lift the lower bound, by CP-SAT.

    python benchmarks/one_device.py INSTANCE [--suite standard] [--devices 0 7 6,7]
                                    [--counted] [--whole | --trips] [--targets 530,531.5]
                                    [--time-limit 180] [--workers 2] [--out benchmarks/one_device]

The relaxation of a set of devices (zbsolve's own, `zbsolve/solvers/cpsat/relaxed.py`, whose
bound phase asks it of one device at a time) keeps their ops, each device's no-overlap and memory
limit, and reduces every other op to the least delay it imposes: between two kept ops, the
longest path through the dependencies, microbatch order and memory-implied edges that
zbsolve derives (the graph its bounds use), and each kept op keeps its head (earliest start)
and tail (least time to the end after its start). The optimal schedule that keeps those
implied edges is a schedule of the relaxation, no longer, so the relaxation's optimum bounds
the problem's. Where CP-SAT finds a relaxation schedule as short as zbsolve's static bound,
no argument about those devices alone can raise that bound.

Each `--devices` argument is one relaxation: the devices it lists, separated by commas, are
kept together (default: each device alone). `--counted` adds the memory limit counted at
each F's start (`zbsolve/solvers/cpsat/counted.py`) on the kept devices. With `--targets`
each relaxation is held to each target: *infeasible* proves the problem's optimum exceeds
the target; otherwise it is minimised within the target, as without one. Makespan
objective only. With F&B pairs the kept devices pair their ops as the whole model does, and
each delay counts from when an op hands on its result (a pair's end); not with `--trips`.

`--whole` relaxes less: zbsolve's whole CP-SAT model (`zbsolve/solvers/cpsat/model.py`)
with every op, its exact durations and dependencies, memory limits and F&B pairs, where
only the devices not kept may run any number of ops at once. Every schedule of the model is
one of it, so its optimum bounds the model's; its makespan starts, as the model's, at the
static bound. `--counted` there forces the counted memory form on (off without it).

`--trips` relaxes less in another way: the kept devices' relaxation also keeps, on the other
devices, the F and backward ops of the stages a microbatch crosses after its first stage on a
kept device (`relaxed.trip_ops`), one at a time on their devices, under no memory limit. A
microbatch's activation there waits for that trip, and on a V the trips of microbatches in
flight together contend for the same devices; the kept devices' relaxation alone sees none of
it. The *ops* column counts the kept ops in every form. Writes DIR/one_device.md and .json.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.run import fmt, machine, markdown_table, parsed, ran_on  # noqa: E402
from benchmarks.study import chosen_problem, one_instance_arguments, positive_values, run_cpsat, write_study  # noqa: E402

HERE = Path(__file__).resolve().parent


def relax(data, paths, devices: list[int], counted: bool, target: int | None, time_limit: float,
          workers: int, whole: bool = False, trips: bool = False) -> dict:
    """Solve the relaxation that keeps `devices`: zbsolve's own
    (`zbsolve/solvers/cpsat/relaxed.py`, from `paths`, the bounds' `Paths` of `data`) or,
    with `whole`, the whole model with only those devices' no-overlap (`paths` None). With
    the memory limit also counted at each F's start when `counted`: minimise its makespan,
    or with a `target` (solver units) ask for a schedule no longer. With `trips`, the ops of
    the trips from the kept devices are kept too. Its status, best value and proven bound, in
    problem units."""
    from zbsolve.solvers.cpsat.model import build_model
    from zbsolve.solvers.cpsat.relaxed import relaxation, trip_ops

    crossed = trip_ops(data, devices) if trips else []
    if whole:
        model, _, makespan, _, _ = build_model(data, counted_memory=counted, one_at_a_time=devices)
    else:
        model, makespan = relaxation(data, paths, devices, counted, crossed=crossed)
    if target is not None:
        model.Add(makespan <= target)
    solver, code, found, seconds = run_cpsat(model, time_limit, workers)
    status = solver.StatusName(code).lower()
    if target is not None and status == "optimal":
        status = "feasible"  # a schedule within the target; its optimum is not the question
    return {"devices": devices, "counted": counted, "whole": whole, "trips": trips,
            "ops": sum(len(data.device_ops[d]) for d in devices) + len(crossed),
            "target": None if target is None else data.value(target), "status": status,
            "best": data.value(solver.ObjectiveValue()) if found else None,
            "bound": data.value(solver.BestObjectiveBound()) if found else None,
            "seconds": seconds}


def main() -> int:
    parser = one_instance_arguments(__doc__, HERE / "one_device", 180.0, "relaxation")
    parser.add_argument("--devices", nargs="+", help="one relaxation per argument: its devices, separated by commas "
                                                     "(default: each device alone)")
    parser.add_argument("--counted", action="store_true", help="also count memory at each F's start")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--whole", action="store_true", help="keep every op, exact dependencies and F&B pairs; "
                                                           "only the other devices' no-overlap is dropped")
    kind.add_argument("--trips", action="store_true", help="also keep the F and backward ops of the stages a "
                                                           "microbatch crosses after its first stage on a kept "
                                                           "device, without their memory limit")
    parser.add_argument("--targets", default="", help="ask for schedules no longer than these, separated by commas "
                                                      "(default: minimise)")
    args = parsed(parser)
    from zbsolve.ops import OpGraph
    from zbsolve.solvers.base import build_input
    from zbsolve.solvers.bounds import Paths

    problem = chosen_problem(args.suite, args.instance)
    if problem is None:
        return 2
    if problem.objective != "makespan" or (problem.fb_overlap is not None and args.trips):
        print(f"{args.instance!r}: only the makespan objective is relaxed here, F&B pairs not with --trips",
              file=sys.stderr)
        return 2
    groups = _groups(args.devices, problem.devices)
    targets = positive_values(args.targets)
    if groups is None or targets is None:
        print(f"--devices: device numbers from 0 to {problem.devices - 1}, separated by commas within one "
              "relaxation; --targets: positive values separated by commas", file=sys.stderr)
        return 2
    data = build_input(OpGraph(problem), problem.split_backward, problem.objective)
    static = data.lower_bound()
    per_unit = static / data.value(static)
    settings = {"instance": args.instance, "suite": args.suite, "time_limit_s": args.time_limit,
                "workers": args.workers, "counted": args.counted, "whole": args.whole, "trips": args.trips,
                "pairs": problem.fb_overlap is not None, "memory_limited": problem.memory_limit is not None,
                "static_bound": data.value(static),
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    # The longest paths, once for every relaxation; the whole model needs none.
    paths, rows = (None if args.whole else Paths(data)), []
    for devices in groups:
        for target in targets or [None]:
            asked = "" if target is None else f", at most {target:g}"
            print(f"devices {','.join(map(str, devices))}{asked} ...", end=" ", flush=True)
            rows.append(relax(data, paths, devices, args.counted, None if target is None else int(target * per_unit),
                              args.time_limit, args.workers, args.whole, args.trips))
            print(f"{rows[-1]['status']}: best {rows[-1]['best']}, bound {rows[-1]['bound']}", flush=True)
    write_study(args.out, "one_device", {"settings": settings, "relaxations": rows}, report(settings, rows))
    return 0


def _groups(given: list[str] | None, count: int) -> list[list[int]] | None:
    """The relaxations `--devices` names (each device alone when not given); None when it
    names anything else."""
    if not given:
        return [[d] for d in range(count)]
    groups = []
    for text in given:
        parts = [part.strip() for part in text.split(",")]
        if not all(part.isdigit() and int(part) < count for part in parts):
            return None
        groups.append(sorted({int(part) for part in parts}))
    return groups


def report(settings: dict, rows: list[dict]) -> str:
    """The markdown table of the relaxations."""
    memory = ("no memory limit" if settings.get("memory_limited") is False  # absent in studies run before it was kept
              else "and the memory limit also counted at each F's start" if settings["counted"]
              else "cumulative memory only")
    kind = ("the whole model, only the kept devices one op at a time" if settings.get("whole")
            else "kept devices' ops and the F and backward ops of their microbatches' trips (no memory limit "
            "there) with the least delays between them" if settings.get("trips")
            else "kept devices' ops with the least delays between them")
    if settings.get("pairs") and not settings.get("whole"):
        kind += " (F&B pairs on the kept devices; a delay counts from a pair's end)"
    lines = [
        f"# Device relaxations of {settings['instance']}", "",
        f"Suite `{settings['suite']}`, {kind}, {memory}, CP-SAT, {settings['workers']} worker(s), "
        f"{settings['time_limit_s']:g} s per relaxation; {ran_on(settings)}. zbsolve's static bound: "
        f"{fmt(settings['static_bound'])}.", "",
        "*at most*: CP-SAT asked for a relaxation schedule no longer (*infeasible*: proven that none exists, so "
        "the problem's optimum is longer); *-*: minimised. *best*: the shortest relaxation schedule found, so the "
        "relaxation's optimum is at most this; *bound*: what CP-SAT proved, so the optimum is at least this.", "",
    ]
    cells = [[",".join(map(str, r["devices"])), r["ops"], fmt(r["target"]) if r["target"] is not None else "-",
              r["status"], fmt(r["best"]) if r["best"] is not None else "-",
              fmt(r["bound"]) if r["bound"] is not None else "-", r["seconds"]] for r in rows]
    lines += markdown_table(["devices", "ops", "at most", "status", "best", "bound", "seconds"], cells)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
