"""Does counting memory at every F's start let CP-SAT prove more?

    python benchmarks/memory_count.py INSTANCE [--suite bound-gap] [--targets 822,830]
                                      [--minimize] [--time-limit 60] [--workers 2]
                                      [--out benchmarks/memory_count]

zbsolve's CP-SAT model holds each activation (and residual) as an interval from its F's
start to its B's (W's) end, under a cumulative limit. Memory rises only when an F starts,
so the same limit can be written as one linear constraint per F: the activations of the
F's started by then, less what the B's and W's ended by then have released, within the
limit, with one Boolean per F, B and W of the device saying whether it has started (ended)
by that moment (`zbsolve/solvers/cpsat/counted.py`; the model adds it by itself up to a
size). Both forms allow exactly the same schedules; they differ in what CP-SAT can deduce
from them. The study forces the counted form on and off.

For each target T (in the instance's unit) the study asks both models whether a schedule
with objective at most T exists: infeasible proves that T is below the optimum.
`--minimize` also solves the instance with the counted model. Makespan, one pipe or two,
no F&B pairs. Writes DIR/memory_count.md and .json.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.run import fmt, machine, markdown_table, parsed, ran_on  # noqa: E402
from benchmarks.study import chosen_problem, one_instance_arguments, positive_values, run_cpsat, write_study  # noqa: E402

HERE = Path(__file__).resolve().parent


def probe(data, target: int | None, counted: bool, time_limit: float, workers: int) -> dict:
    """Objective at most `target` (solver units), or minimised when None: CP-SAT's answer."""
    from zbsolve.solvers.cpsat.counted import booleans, counted_terms
    from zbsolve.solvers.cpsat.model import build_model

    if target is not None and target < data.lower_bound():  # the model's domains would be empty
        return {"target": data.value(target), "counted": counted, "booleans": 0, "status": "below the static bound",
                "value": None, "bound": None, "seconds": 0.0}
    if target is not None:
        data.horizon = min(data.horizon, target)
    model, _, objective, _, _ = build_model(data, counted_memory=counted)
    if target is not None:
        model.Add(objective <= target)
    booleans_used = booleans(counted_terms(data)) if counted else 0
    solver, code, found, seconds = run_cpsat(model, time_limit, workers)
    return {"target": None if target is None else data.value(target), "counted": counted, "booleans": booleans_used,
            "status": solver.StatusName(code).lower(),
            "value": data.value(int(solver.ObjectiveValue())) if found else None,
            "bound": data.value(int(solver.BestObjectiveBound())) if found else None,
            "seconds": seconds}


def main() -> int:
    parser = one_instance_arguments(__doc__, HERE / "memory_count", 60.0, "question")
    parser.set_defaults(suite="bound-gap")
    parser.add_argument("--targets", default="", help="objective values to rule out, separated by commas")
    parser.add_argument("--minimize", action="store_true", help="also solve the counted model for its optimum")
    args = parsed(parser)
    from zbsolve.ops import OpGraph
    from zbsolve.solvers.base import build_input

    problem = chosen_problem(args.suite, args.instance)
    if problem is None:
        return 2
    if problem.objective != "makespan" or problem.fb_overlap is not None or problem.memory_limit is None:
        print(f"{args.instance!r}: only the makespan with a memory limit and without F&B pairs is counted here",
              file=sys.stderr)
        return 2
    targets = positive_values(args.targets)
    if targets is None or not (targets or args.minimize):
        print("--targets: positive values separated by commas (or --minimize)", file=sys.stderr)
        return 2

    def fresh():
        return build_input(OpGraph(problem), problem.split_backward, problem.objective)

    data = fresh()
    per_unit = data.lower_bound() / data.value(data.lower_bound())
    settings = {"instance": args.instance, "suite": args.suite, "time_limit_s": args.time_limit,
                "workers": args.workers, "ops": len(data.ops), "static_bound": data.value(data.lower_bound()),
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    rows = []
    for target in targets:
        for counted in (True, False):
            print(f"at most {target:g}, {'counted' if counted else 'intervals only'} ...", end=" ", flush=True)
            rows.append(probe(fresh(), int(target * per_unit), counted, args.time_limit, args.workers))
            print(rows[-1]["status"], rows[-1]["seconds"], "s", flush=True)
    if args.minimize:
        print("minimise, counted ...", end=" ", flush=True)
        rows.append(probe(fresh(), None, True, args.time_limit, args.workers))
        print(rows[-1]["status"], rows[-1]["value"], flush=True)
    write_study(args.out, "memory_count", {"settings": settings, "rows": rows}, report(settings, rows))
    return 0


def report(settings: dict, rows: list[dict]) -> str:
    lines = [
        f"# Memory counted at each F's start: {settings['instance']}", "",
        f"Suite `{settings['suite']}`, {settings['ops']} ops, CP-SAT, {settings['workers']} worker(s), "
        f"{settings['time_limit_s']:g} s per question; {ran_on(settings)}. zbsolve's static bound: "
        f"{fmt(settings['static_bound'])}.", "",
        "*at most*: CP-SAT asked for a schedule with objective at most this (*infeasible*: proven that none "
        "exists); *-*: minimised. *counted*: zbsolve's model plus the limit counted at every F's start; "
        "otherwise zbsolve's model alone.", "",
    ]
    cells = [[fmt(r["target"]) if r["target"] is not None else "-", "yes" if r["counted"] else "no",
              r["booleans"], r["status"], fmt(r["value"]) if r["value"] is not None else "-",
              fmt(r["bound"]) if r["bound"] is not None else "-", r["seconds"]] for r in rows]
    lines += markdown_table(["at most", "counted", "Booleans", "status", "value", "bound", "seconds"], cells)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
