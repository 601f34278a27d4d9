"""How far one-device reasoning can lift the lower bound: each device's relaxation, by CP-SAT.

    python benchmarks/one_device.py INSTANCE [--suite standard] [--devices 0,7]
                                    [--time-limit 180] [--workers 2] [--out benchmarks/one_device]

The relaxation of device d keeps d's ops, their no-overlap and d's memory limit, and reduces
every other op to the least delay it imposes: between two ops of d, the longest path through
the dependencies, microbatch order and memory-implied edges that zbsolve derives (the graph
its bounds use), and each op of d keeps its head (earliest start) and tail (least time to the
end after its start). The optimal schedule that keeps those implied edges is a schedule of
the relaxation, no longer, so the relaxation's optimum bounds the problem's. Where CP-SAT
finds a relaxation schedule as short as zbsolve's static bound, no argument about device d
alone can raise that bound. Makespan objective, no F&B pairs. Writes DIR/one_device.md and .json.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.run import _fmt, machine, markdown_table, parsed, ran_on  # noqa: E402
from benchmarks.study import chosen_problem, one_instance_arguments, run_cpsat, write_study  # noqa: E402

HERE = Path(__file__).resolve().parent


def relax_device(data, paths, device: int, time_limit: float, workers: int) -> dict:
    """Solve device `device`'s relaxation (`paths`: the bounds' `_Paths` of `data`); its best
    value, proven bound and status, in problem units."""
    from ortools.sat.python import cp_model

    from zbsolve.ops import Op
    from zbsolve.solvers.bounds import UNREACHED

    ops = data.device_ops[device]
    model = cp_model.CpModel()
    start = {op: model.NewIntVar(data.head[op], data.horizon - data.tail[op], str(op)) for op in ops}
    for a in ops:
        reach = paths.longest_from(a)
        for b in ops:
            delay = reach[paths.index[b]]
            if b != a and delay != UNREACHED:
                model.Add(start[b] >= start[a] + delay)
    model.AddNoOverlap([model.NewFixedSizeIntervalVar(start[op], data.duration[op], f"i{op}") for op in ops])
    if data.memory_limit is not None:
        intervals, demands = [], []
        for f in (op for op in ops if op.kind == "F"):
            activation = data.memory_effect[f][0]
            if data.split:
                w = Op("W", f.pipe, f.stage, f.microbatch)
                held = [(Op("B", f.pipe, f.stage, f.microbatch), activation - data.memory_effect[w][1]),
                        (w, data.memory_effect[w][1])]
            else:
                held = [(Op("BW", f.pipe, f.stage, f.microbatch), activation)]
            for release, amount in held:
                if amount > 0:
                    end = start[release] + data.duration[release]
                    size = model.NewIntVar(0, data.horizon, f"m{f}{release.kind}")
                    intervals.append(model.NewIntervalVar(start[f], size, end, f"mem{f}{release.kind}"))
                    demands.append(amount)
        model.AddCumulative(intervals, demands, data.memory_limit[device])
    makespan = model.NewIntVar(0, data.horizon, "makespan")
    for op in ops:
        model.Add(makespan >= start[op] + data.tail[op])
    model.Minimize(makespan)
    solver, code, found, seconds = run_cpsat(model, time_limit, workers)
    return {"device": device, "ops": len(ops), "status": solver.StatusName(code).lower(),
            "best": data.value(solver.ObjectiveValue()) if found else None,
            "bound": data.value(solver.BestObjectiveBound()) if found else None,
            "seconds": seconds}


def main() -> int:
    parser = one_instance_arguments(__doc__, HERE / "one_device", 180.0, "device")
    parser.add_argument("--devices", help="comma-separated devices (default: all)")
    args = parsed(parser)
    from zbsolve.ops import OpGraph
    from zbsolve.solvers.base import build_input
    from zbsolve.solvers.bounds import _Paths

    problem = chosen_problem(args.suite, args.instance)
    if problem is None:
        return 2
    if problem.objective != "makespan" or problem.fb_overlap is not None:
        print(f"{args.instance!r}: only the makespan objective without F&B pairs is relaxed here", file=sys.stderr)
        return 2
    data = build_input(OpGraph(problem), problem.split_backward, problem.objective)
    devices = _devices(args.devices, problem.devices)
    if devices is None:
        print(f"--devices: give device numbers from 0 to {problem.devices - 1}, separated by commas",
              file=sys.stderr)
        return 2
    static = data.value(data.lower_bound())
    settings = {"instance": args.instance, "suite": args.suite, "time_limit_s": args.time_limit,
                "workers": args.workers, "static_bound": static, "date": time.strftime("%Y-%m-%d %H:%M"),
                "machine": machine()}
    paths, rows = _Paths(data), []  # the longest paths, once for every device
    for device in devices:
        print(f"device {device} ...", end=" ", flush=True)
        rows.append(relax_device(data, paths, device, args.time_limit, args.workers))
        print(f"{rows[-1]['status']}: best {rows[-1]['best']}, bound {rows[-1]['bound']}", flush=True)
    write_study(args.out, "one_device", {"settings": settings, "devices": rows}, report(settings, rows))
    return 0


def _devices(text: str | None, count: int) -> list[int] | None:
    """The devices `--devices` names (all when not given); None when it names anything else."""
    if not text:
        return list(range(count))
    parts = text.split(",")
    if not all(part.strip().isdigit() and int(part) < count for part in parts):
        return None
    return [int(part) for part in parts]


def report(settings: dict, rows: list[dict]) -> str:
    """The markdown table of the devices' relaxations."""
    lines = [
        f"# One-device relaxations of {settings['instance']}", "",
        f"Suite `{settings['suite']}`, CP-SAT, {settings['workers']} worker(s), {settings['time_limit_s']:g} s per "
        f"device; {ran_on(settings)}. zbsolve's static bound: {_fmt(settings['static_bound'])}.", "",
        "*best*: the shortest relaxation schedule found, so the relaxation's optimum is at most this; "
        "*bound*: what CP-SAT proved, so the optimum is at least this.", "",
    ]
    cells = [[r["device"], r["ops"], _fmt(r["best"]) if r["best"] is not None else "-",
              _fmt(r["bound"]) if r["bound"] is not None else "-", r["status"], r["seconds"]] for r in rows]
    lines += markdown_table(["device", "ops", "best", "bound", "status", "seconds"], cells)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
