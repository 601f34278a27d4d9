"""Does the memory limit counted at each F's start help zbsolve's own solves?

    python benchmarks/counted_memory.py [--time-limit 60] [--workers 2] [--out benchmarks/counted_memory]

zbsolve's CP-SAT model adds the counted form (zbsolve/solvers/cpsat/counted.py) by itself on
small models whose devices hold several stages. This solves each instance below with
`zbsolve.solvers.solve` twice, the counted form forced on and forced off (each solve in a
fresh process), and writes DIR/counted_memory.md and .json: value, bound, status and
seconds of each, the Booleans the form needs and whether zbsolve would add it by itself.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import from_profile  # noqa: E402
from benchmarks.run import fmt, in_child, machine, markdown_table, parsed, ran_on  # noqa: E402
from benchmarks.study import write_study  # noqa: E402

HERE = Path(__file__).resolve().parent

# (name, model, P, M, placement, memory): the multi-stage placements it helps, and single
# placement, where it is left out.
INSTANCES = [
    ("1.5B V-shape 0.5x P=4 M=6", "zb-1.5b", 4, 6, "vshape", "0.5x"),
    ("1.5B V-shape 0.5x P=4 M=8", "zb-1.5b", 4, 8, "vshape", "0.5x"),
    ("6.2B V-shape 0.5x P=4 M=6", "zb-6.2b", 4, 6, "vshape", "0.5x"),
    ("1.5B interleaved:2 0.5x P=4 M=8", "zb-1.5b", 4, 8, "interleaved:2", "0.5x"),
    ("1.5B DualPipe placement 0.75x P=4 M=8", "zb-1.5b", 4, 8, "bidirectional", "0.75x"),
    ("1.5B single 0.75x P=4 M=16", "zb-1.5b", 4, 16, "single", "0.75x"),
    ("1.5B single 0.75x P=8 M=16", "zb-1.5b", 8, 16, "single", "0.75x"),
]


def _problem(index: int):
    _, model, P, M, placement, memory = INSTANCES[index]
    return from_profile(model, P, M, placement=placement, memory=memory)


def solve_one(index: int, counted: bool, time_limit: float, workers: int) -> dict:
    """One solve with the counted form forced on or off (in its own process)."""
    import zbsolve.solvers.cpsat.model as model
    from zbsolve.solvers import solve

    chosen = model.planned
    model.planned = lambda data, forced=None: chosen(data, counted)
    t0 = time.monotonic()
    solved = solve(_problem(index), "cpsat", time_limit=time_limit, workers=workers)
    return {"value": solved.solver.objective, "bound": solved.solver.bound, "status": solved.solver.status,
            "seconds": round(time.monotonic() - t0, 2)}


def describe(index: int) -> dict:
    from zbsolve.ops import OpGraph
    from zbsolve.solvers.base import build_input
    from zbsolve.solvers.cpsat.counted import booleans, counted_terms, planned

    problem = _problem(index)
    data = build_input(OpGraph(problem), problem.split_backward, problem.objective)
    return {"instance": INSTANCES[index][0], "ops": len(data.ops), "booleans": booleans(counted_terms(data)),
            "by_default": planned(data) is not None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(HERE / "counted_memory"), help="output folder")
    args = parsed(parser)
    settings = {"time_limit_s": args.time_limit, "workers": args.workers,
                "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    rows = []
    for index, (name, *_) in enumerate(INSTANCES):
        row = describe(index)
        for counted in (True, False):
            print(f"{name}, counted {'on' if counted else 'off'} ...", end=" ", flush=True)
            row["with" if counted else "without"] = found = in_child(solve_one, index, counted, args.time_limit,
                                                                       args.workers)
            print(found.get("error") or f"{found['value']:g} {found['status']} ({found['seconds']} s)", flush=True)
        rows.append(row)
    write_study(args.out, "counted_memory", {"settings": settings, "rows": rows}, report(settings, rows))
    return 0


def _cell(found: dict) -> str:
    if "error" in found:
        return f"error: {found['error']}"
    if found["status"] == "optimal":
        return f"{fmt(found['value'])} optimal, {found['seconds']} s"
    return f"{fmt(found['value'])} {found['status']}, bound {fmt(found['bound'])}"


def report(settings: dict, rows: list[dict]) -> str:
    lines = [
        "# The counted memory limit in zbsolve's solves", "",
        f"CP-SAT, {settings['workers']} worker(s), {settings['time_limit_s']:g} s per solve; {ran_on(settings)}.", "",
        "*with* / *without*: the counted form forced on / off; *by default*: whether zbsolve adds it by itself.", "",
    ]
    cells = [[r["instance"], r["ops"], r["booleans"], "yes" if r["by_default"] else "no", _cell(r["with"]),
              _cell(r["without"])] for r in rows]
    lines += markdown_table(["instance", "ops", "Booleans", "by default", "with", "without"], cells)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
