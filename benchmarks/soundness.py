"""zbsolve's lower bounds and `optimal` claims against an independent plain model.

    python benchmarks/soundness.py [--count 100] [--seed 0] [--time-limit 15] [--solve-limit 8]
                                   [--workers 2] [--objective makespan|span] [--out benchmarks/soundness]

Every gap in results.md is certified only if each bound zbsolve reports is a true lower
bound. The unit tests check that on tiny problems; this draws random problems a size up (2
to 4 devices, up to 8 microbatches, every placement, memory limits from 0.5x, split or fused
backward, F&B pairs, both objectives or the one `--objective` names, seeded so that a run
repeats) and checks each against
the plain CP-SAT model of tests/exact_model.py (no symmetry breaking, no implied edges, no
bounds; F&B pairs with or without the B's W absorbed). zbsolve solves it; the plain model,
with every start fixed, says whether it accepts that schedule, and then searches by itself.
The best plain schedule is the better of its own and zbsolve's where accepted. Violations:
the plain model rejecting zbsolve's validated schedule; the static bound, a solve's final
bound, or an `optimal` solve's value above the best plain schedule; zbsolve's schedule below
an optimum the plain model proved. It also says how often the static bound meets a proven
optimum, and how far below it lies otherwise. Writes DIR/soundness.json and DIR/soundness.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import warnings
from dataclasses import astuple
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the plain model lives with the tests that check it

from benchmarks.run import fmt, machine, markdown_table, parsed, ran_on  # noqa: E402

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-6  # values are exact on the problems' tick grid; this only absorbs float printing
PLACEMENTS = ("single", "single", "interleaved:2", "vshape", "vshape", "bidirectional")
MEMORY = (None, "0.5x", "0.625x", "0.75x", "1x", "1.25x", "1.5x", "2x")
VIOLATIONS = {
    "rejected": "plain model rejects zbsolve's validated schedule",
    "static": "static bound above the best plain schedule",
    "solve_bound": "solve's bound above the best plain schedule",
    "optimal": "`optimal` solve above the best plain schedule",
    "below_proven": "zbsolve's schedule below the plain model's proven optimum",
}


def random_problem(rng: random.Random, objective: str | None = None):
    """A random problem with at least one schedule, and the options it was built from; with
    `objective`, that objective in place of the one drawn (drawn all the same, so that the
    problems are those of the same seed without it, objective apart)."""
    from helpers import feasible

    from zbsolve.errors import ProblemWarning
    from zbsolve.placements import build_problem
    from zbsolve.problem import StageCost

    while True:
        placement = rng.choice(PLACEMENTS)
        if placement == "bidirectional":
            P, M = rng.choice([2, 4]), 2 * rng.randint(1, 3)
        else:
            P, M = rng.randint(2, 4), rng.randint(2, 8 if placement == "single" else 6)
        costs = []
        for _ in range(P):
            activation = rng.randint(1, 4)
            costs.append(StageCost(rng.randint(1, 30) / 10, rng.randint(1, 30) / 10, rng.randint(1, 30) / 10,
                                   activation, rng.choice([0, 0.25, 0.4, 0.5, 1.0]) * activation))
        options = {"placement": placement, "comm": rng.choice([0.0, 0.1, 0.5]), "memory": rng.choice(MEMORY),
                   "split_backward": rng.random() < 0.8, "objective": rng.choice(["makespan", "makespan", "span"])}
        options["objective"] = objective or options["objective"]
        if placement != "single" and rng.random() < 0.35:  # pairs need two stages on a device
            # Half to all of the cheapest stage's F + B + W: from pairs that save little to pairs
            # shorter than their longer half (which zbsolve warns of, and must still handle).
            cheapest = min(c.F + c.B + c.W for c in costs)
            options["fb_overlap"] = max(1, round(cheapest * rng.uniform(0.5, 1.0) * 10)) / 10
        with warnings.catch_warnings():  # the draws are deliberate; zbsolve's warnings say so
            warnings.simplefilter("ignore", ProblemWarning)
            problem = build_problem(P, M, costs, **options)
        if feasible(problem):
            return problem, {"P": P, "M": M, **options, "costs": [list(astuple(c)) for c in costs]}


def check(problem, time_limit: float, solve_limit: float, workers: int) -> dict:
    """The static bound, zbsolve's solve, whether the plain model accepts its schedule, the
    plain model's own best and proof, and the violations."""
    from exact_model import plain_solve

    from zbsolve.solvers import lower_bound, solve
    from zbsolve.validate import validate

    static = lower_bound(problem)
    solved = solve(problem, "cpsat", time_limit=solve_limit, workers=workers, deterministic=False)
    validate(solved)
    kept, decided = plain_solve(problem, time_limit, workers, fixed=plain_starts(solved))
    accepted = True if kept is not None else (False if decided else None)  # None: undecided in time
    began = time.monotonic()
    plain, proven = plain_solve(problem, time_limit, workers)
    plain_s = time.monotonic() - began
    # The plain model's best known schedule: its own search's, or zbsolve's where it accepts it
    # (on tight memory its search alone can find nothing in the limit).
    known = [value for value in (plain, kept) if value is not None]
    best = min(known) if known else None
    row = {"static_bound": static, "solved": solved.value, "status": solved.solver.status,
           "bound": solved.solver.bound, "accepted": accepted, "plain": plain, "plain_proven": proven,
           "plain_s": round(plain_s, 2), "best": best}
    found = []
    if accepted is False:
        found.append("rejected")
    if best is not None:
        if static > best + TOLERANCE:
            found.append("static")
        if solved.solver.bound is not None and solved.solver.bound > best + TOLERANCE:
            found.append("solve_bound")
        if solved.solver.status == "optimal" and solved.value > best + TOLERANCE:
            found.append("optimal")
    if plain is not None and proven and solved.value < plain - TOLERANCE:
        found.append("below_proven")
    row["violations"] = found
    return row


def plain_starts(schedule) -> dict:
    """The schedule's start times for the plain model, which runs B and W apart when the
    backward is split: a fused BW there (a hand-made schedule's) is its B with its W straight
    after, or inside an F&B pair, both with the pair (the W absorbed)."""
    from zbsolve.ops import Op, OpGraph

    graph, starts = OpGraph(schedule.problem), {}
    for ops in schedule.devices:
        for timed in ops:
            op = timed.op
            if op.kind != "BW" or not schedule.problem.split_backward:
                starts[op] = timed.start
                continue
            b, w = (Op(kind, op.pipe, op.stage, op.microbatch) for kind in ("B", "W"))
            starts[b] = timed.start
            starts[w] = timed.start if timed.overlap is not None else timed.start + graph.time(graph.duration(b))
    return starts


def family(row: dict) -> str:
    return row["placement"] + (" + pairs" if row.get("fb_overlap") is not None else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="random problems (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the problem generator (default 0)")
    parser.add_argument("--time-limit", type=float, default=15.0, help="seconds for the plain model (default 15)")
    parser.add_argument("--solve-limit", type=float, default=8.0, help="seconds for zbsolve's solve (default 8)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--objective", choices=["makespan", "span"],
                        help="draw only problems with this objective (default: both, a third of them span)")
    parser.add_argument("--out", default=str(HERE / "soundness"), help="output folder")
    args = parsed(parser)
    if args.count < 1 or args.solve_limit <= 0:
        parser.error("--count must be at least 1 and --solve-limit positive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"count": args.count, "seed": args.seed, "plain_time_limit_s": args.time_limit,
                "solve_time_limit_s": args.solve_limit, "workers": args.workers,
                "objective": args.objective, "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    rng = random.Random(args.seed)
    rows = []
    for n in range(1, args.count + 1):
        problem, options = random_problem(rng, args.objective)
        row = {**options, **check(problem, args.time_limit, args.solve_limit, args.workers)}
        rows.append(row)
        said = ", ".join(VIOLATIONS[v] for v in row["violations"]) or "ok"
        print(f"[{n}/{args.count}] {family(row)} P={row['P']} M={row['M']} {row['memory'] or 'no limit'} "
              f"{row['objective']}: bound {row['static_bound']:g}, zbsolve {row['solved']:g} {row['status']} "
              f"(plain model accepts it: {row['accepted']}), plain search {fmt(row['plain'])}"
              f"{' (proven)' if row['plain_proven'] else ''}: {said}",
              flush=True)
        (out / "soundness.json").write_text(json.dumps({"settings": settings, "problems": rows}, indent=1) + "\n",
                                            encoding="utf-8")
    write_markdown(out / "soundness.md", settings, rows)
    print(f"wrote {out / 'soundness.md'}")
    return 1 if any(row["violations"] for row in rows) else 0


def write_markdown(path: Path, settings: dict, rows: list[dict]) -> None:
    lines = [
        "# Lower bounds and `optimal` claims against a plain model", "",
        f"{settings['count']} random problems (seed {settings['seed']}"
        f"{', objective ' + settings['objective'] + ' only' if settings.get('objective') else ''}); "
        "plain model (tests/exact_model.py) "
        f"{settings['plain_time_limit_s']:g} s, zbsolve's CP-SAT solve {settings['solve_time_limit_s']:g} s, "
        f"{settings['workers']} worker(s) each; {ran_on(settings)}.", "",
        "*proven*: problems whose optimum the plain model's own search proved. *bound = optimum*: of "
        "those, where zbsolve's static bound (known before any search) equals it; *shortfall*: how far "
        "below the proven optimum the static bound lies, as a share of it. *zbsolve optimal*: solves that "
        "proved their value. *violations*: problems failing any of the checks below.", "",
    ]
    cells = []
    for name in sorted({family(r) for r in rows}):
        mine = [r for r in rows if family(r) == name]
        proven = [r for r in mine if r["plain_proven"] and r["plain"] is not None]
        short = [(r["plain"] - r["static_bound"]) / r["plain"] for r in proven if r["plain"] > 0]
        cells.append([name, len(mine), len(proven), sum(s <= TOLERANCE for s in short),
                      f"{100 * statistics.median(short):.2f}%" if short else "-",
                      f"{100 * max(short):.2f}%" if short else "-",
                      sum(r["status"] == "optimal" for r in mine), sum(bool(r["violations"]) for r in mine)])
    lines += markdown_table(["family", "problems", "proven", "bound = optimum", "median shortfall",
                             "worst shortfall", "zbsolve optimal", "violations"], cells)
    lines += ["", "| check | violations |", "|---|---|"]
    lines += [f"| {text} | {sum(key in r['violations'] for r in rows)} |" for key, text in VIOLATIONS.items()]
    bad = [r for r in rows if r["violations"]]
    if bad:
        lines += ["", "Problems with a violation (options as given to `build_problem`):", ""]
        lines += [f"- {json.dumps({k: v for k, v in r.items()})}" for r in bad]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
