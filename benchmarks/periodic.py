"""Which periods a periodic schedule can keep: one block of microbatches repeated, by CP-SAT.

    python benchmarks/periodic.py INSTANCE [--suite standard] [--block 1]
                                  [--periods 1,1.04,1.08] [--time-limit 60] [--workers 2]
                                  [--out benchmarks/periodic]

zbsolve's static bound lets every device work without idling between its warm-up and its
cool-down. Where memory is tight that steady state may not exist: each microbatch holds its
first stage's activation for a whole round trip through the pipeline, and the limit caps how
many round trips overlap. This study asks, for a period T = factor x (block x the busiest
device's work per microbatch): is there a schedule in which microbatch n runs every op at
(n // block) x T plus the offset of its op in the block? Offsets must keep the dependencies
within a microbatch, never overlap on a device once taken modulo T, and keep memory within
the limit: at the start of each F (where the level rises) a part of an activation held from
time s to time e counts once for each of its copies alive then, floor((t - s) / T) -
floor((t - e) / T). CP-SAT answers infeasible (proven: no such schedule exists for that
period), feasible (the repeated block is re-timed as early as its order allows and checked
by zbsolve's validator) or unknown. A proof says nothing of schedules that are not periodic.

One pipe (single, interleaved:V, vshape), no F&B pairs. Writes DIR/periodic.md and .json.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.run import fmt, machine, markdown_table, parsed, ran_on  # noqa: E402
from benchmarks.study import chosen_problem, one_instance_arguments, positive_values, write_study  # noqa: E402

HERE = Path(__file__).resolve().parent


def block_offsets(data, block: int, period: int, time_limit: float, workers: int) -> tuple[str, dict | None]:
    """CP-SAT's status for one period (solver units) and, when found, the offsets of the
    block's ops (microbatches 0 to block - 1), shortest block first."""
    from ortools.sat.python import cp_model

    from zbsolve.ops import Op

    ops = [op for op in data.ops if op.microbatch < block]
    reach = 2 * sum(data.duration[op] for op in ops)  # no offset need lie farther apart
    turns = reach // period + 2
    model = cp_model.CpModel()
    start = {op: model.NewIntVar(-reach, reach, f"s{op}") for op in ops}
    model.Add(start[ops[0]] == 0)  # shifting the whole block changes nothing
    end = {op: start[op] + data.duration[op] for op in ops}
    folded: dict[int, list] = {}
    for op in ops:
        phase = model.NewIntVar(0, period - 1, f"p{op}")
        model.Add(start[op] == model.NewIntVar(-turns, turns, f"t{op}") * period + phase)
        copies = folded.setdefault(data.graph.device(op), [])
        for shift in (0, period):  # an op that wraps past T reappears at the period's start
            copies.append(model.NewFixedSizeIntervalVar(phase + shift, data.duration[op], f"i{op}{shift}"))
        for pred, delay in data.predecessors[op]:
            model.Add(start[op] >= end[pred] + delay)
    for intervals in folded.values():
        model.AddNoOverlap(intervals)
    if data.memory_limit is not None:
        parts: dict[int, list] = {}  # device -> (amount, held from, held until)
        for f in (op for op in ops if op.kind == "F"):
            for kind in ("B", "W", "BW"):
                release = Op(kind, f.pipe, f.stage, f.microbatch)
                if release in start and data.memory_effect[release][1] > 0:
                    parts.setdefault(data.graph.device(f), []).append(
                        (data.memory_effect[release][1], start[f], end[release]))

        def copies_before(moment, since):
            """floor((moment - since) / T) as a variable."""
            whole = model.NewIntVar(-turns - 1, turns + 1, "")
            model.Add(whole * period <= moment - since)
            model.Add(moment - since <= whole * period + period - 1)
            return whole

        for d, held in parts.items():
            for x in (op for op in ops if op.kind == "F" and data.graph.device(op) == d):
                level = [amount * (copies_before(start[x], since) - copies_before(start[x], until))
                         for amount, since, until in held]
                model.Add(sum(level) <= data.memory_limit[d])
    first = model.NewIntVar(-reach, 0, "first")
    last = model.NewIntVar(0, 2 * reach, "last")
    for op in ops:
        model.Add(first <= start[op])
        model.Add(last >= end[op])
    model.Minimize(last - first)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = int(workers)
    code = solver.Solve(model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver.StatusName(code).lower(), None
    shift = solver.Value(first)
    return "feasible", {op: solver.Value(var) - shift for op, var in start.items()}


def repeated(data, offsets: dict, block: int, period: int) -> dict:
    """Every op's start when the block repeats every `period`."""
    from zbsolve.ops import Op

    starts = {}
    for op in data.ops:
        turn, place = divmod(op.microbatch, block)
        starts[op] = turn * period + offsets[Op(op.kind, op.pipe, op.stage, place)]
    return starts


def probe(graph, data, factor: float, block: int, work: int, time_limit: float, workers: int) -> dict:
    """One period's row: status, and for a periodic schedule its validated value."""
    from zbsolve.solvers import retimed
    from zbsolve.solvers.base import BackendResult
    from zbsolve.validate import validate

    period = round(factor * block * work)
    t0 = time.monotonic()
    status, offsets = block_offsets(data, block, period, time_limit, workers)
    row = {"factor": factor, "period": data.value(period), "status": status, "block_length": None, "value": None}
    if offsets is not None:
        row["block_length"] = data.value(max(offsets[op] + data.duration[op] for op in offsets))
        schedule = retimed(graph, data, BackendResult("feasible", repeated(data, offsets, block, period),
                                                      None, None, 0.0), "periodic")
        validate(schedule)  # raises if the block model let anything through
        row["value"] = schedule.value
    row["seconds"] = round(time.monotonic() - t0, 2)
    return row


def main() -> int:
    parser = one_instance_arguments(__doc__, HERE / "periodic", 60.0, "period")
    parser.add_argument("--block", type=int, default=1, help="microbatches per repeated block (default 1)")
    parser.add_argument("--periods", default="1,1.04,1.08,1.12,1.2,1.3",
                        help="periods to try, as factors of the block's busiest-device work")
    args = parsed(parser)
    from zbsolve.ops import OpGraph
    from zbsolve.solvers.base import build_input

    problem = chosen_problem(args.suite, args.instance)
    if problem is None:
        return 2
    if len(problem.pipes) != 1 or problem.fb_overlap is not None:
        print(f"{args.instance!r}: only one-pipe placements without F&B pairs repeat a block here",
              file=sys.stderr)
        return 2
    factors = positive_values(args.periods) or None  # none given is refused too
    if factors is None or args.block < 1 or problem.microbatches % args.block:
        print(f"--periods: positive factors separated by commas; --block: a divisor of the "
              f"{problem.microbatches} microbatches", file=sys.stderr)
        return 2
    graph = OpGraph(problem)
    data = build_input(graph, problem.split_backward, problem.objective)
    work = max(sum(data.duration[op] for op in ops if op.microbatch == 0) for ops in data.device_ops)
    settings = {"instance": args.instance, "suite": args.suite, "block": args.block,
                "time_limit_s": args.time_limit, "workers": args.workers,
                "work_per_microbatch": data.value(work), "static_bound": data.value(data.lower_bound()),
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    rows = []
    for factor in factors:
        print(f"period x{factor:g} ...", end=" ", flush=True)
        rows.append(probe(graph, data, factor, args.block, work, args.time_limit, args.workers))
        print(f"{rows[-1]['status']}, value {rows[-1]['value']}", flush=True)
    write_study(args.out, "periodic", {"settings": settings, "periods": rows}, report(settings, rows))
    return 0


def report(settings: dict, rows: list[dict]) -> str:
    """The markdown table of the periods tried."""
    lines = [
        f"# Periodic schedules of {settings['instance']}", "",
        f"Suite `{settings['suite']}`, blocks of {settings['block']} microbatch(es), CP-SAT, "
        f"{settings['workers']} worker(s), {settings['time_limit_s']:g} s per period; {ran_on(settings)}. "
        f"Busiest device's work per microbatch: {fmt(settings['work_per_microbatch'])}; zbsolve's static "
        f"bound: {fmt(settings['static_bound'])}.", "",
        "*factor*: the period over the block's busiest-device work (1 = no idle between warm-up and cool-down). "
        "*infeasible*: proven, no periodic schedule with this period and block exists. *value*: the "
        "repeated block's objective after re-timing, validated; at most (M / block - 1) x period + *block*, "
        "the block's length.", "",
    ]
    cells = [[fmt(r["factor"]), fmt(r["period"]), r["status"], fmt(r["block_length"]), fmt(r["value"]),
              r["seconds"]] for r in rows]
    lines += markdown_table(["factor", "period", "status", "block", "value", "seconds"], cells)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
