"""Compare CP-SAT parameter settings on chosen benchmark instances; write parameters.md.

    python benchmarks/parameters.py [--time-limit 60] [--workers 2] [--suite standard] [--only NAME ...]
                                    [--settings NAME ...] [--seeds 0,1,2,3] [--out FILE]

Each (instance, setting, seed) runs in a fresh process through the same code as `run.py`,
with the setting's parameters applied to every CpSolver the solve creates. Parameters that
zbsolve sets itself on a solver after creating it win over a setting (time limit, workers,
seed everywhere; with F&B pairs the probing limit; in the mirrored phase use_lns_only and
diversify_lns_params, see zbsolve/solvers/cpsat/model.py), except linearization_level,
whose setting replaces zbsolve's rule by model size; a list is added to the parameter's own
(CP-SAT's repeated fields). With several workers a run does not repeat, so
`--seeds` runs every cell once per seed and adds a table of each cell's mean and range.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.instances import SUITES  # noqa: E402
from benchmarks.run import fmt, in_child, integer_list, machine, markdown_table, parsed, run_instance  # noqa: E402

SETTINGS = {
    "default": {},
    # The root propagation of large memory-bound models took 24 s with it, 14.5 s without
    # (28.3B at 1.25x, 9,216 ops); does the search lose by it?
    "no disjunctive precedences": {"use_precedences_in_disjunctive_constraint": False},
    # Cuts from the no-overlap and cumulative relaxations: stronger bounds, slower nodes.
    "linearization level 2": {"linearization_level": 2},
    # No LP relaxation: on a 1,152-op model with most ops held in order, the full-problem
    # worker spent 4 s before its first branch with it (level 1, the default).
    "linearization level 0": {"linearization_level": 0},
    # Objective shaving ("is there a schedule of at most X?" under a small work limit) leads
    # the search; with 2 workers it takes the one full-problem worker from the portfolio.
    "objective shaving": {"extra_subsolvers": ["objective_shaving"]},
    # F&B pair models search by LNS alone (`mirror`); its improvements came in steps of about
    # one pair's saving on 1.5B, as if stuck between pair counts: do varied LNS settings help?
    # They did there (parameters_pairs/), and zbsolve now sets it itself in that phase: there
    # this setting changes nothing (and without pairs zbsolve's False wins).
    "diversified LNS": {"diversify_lns_params": True},
    # On 14.6B with pairs presolve took 4.1 s before the search began, 1.2 s with one round
    # (its second probing found 2 new bounds): does the search gain by the time?
    "one presolve round": {"max_presolve_iterations": 1},
    # Solutions with every task as early as the others allow: do time-window neighbourhoods
    # of the pair LNS then find more room? (Not seen: parameters_pairs/push-and-violation-ls.md.)
    "push toward start": {"push_all_tasks_toward_start": True},
    # One violation local search worker beside the LNS: does it step across pair counts?
    # (Not seen either, same file.)
    "violation ls": {"num_violation_ls": 1},
}

INSTANCES = ("zb-1.5b 1.25x makespan", "zb-1.5b 1.25x span", "zb-14.6b 1.25x span", "zb-1.5b vshape 1x",
             "zb-1.5b fb_overlap 36.756", "zb-28.3b 1.25x makespan")


def tuned_solver_class(parameters: dict) -> type:
    """A CpSolver that starts with `parameters` set (lists added to the repeated field)."""
    from ortools.sat.python import cp_model

    class Tuned(cp_model.CpSolver):
        def __init__(self) -> None:
            super().__init__()
            for key, value in parameters.items():
                if isinstance(value, list):
                    getattr(self.parameters, key).extend(value)
                else:
                    setattr(self.parameters, key, value)

    return Tuned


def run_with(parameters: dict, suite: str, index: int, time_limit: float, workers: int, seed: int = 0) -> dict:
    import zbsolve.solvers.cpsat.model as cpsat_model

    cpsat_model.cp_model.CpSolver = tuned_solver_class(parameters)
    if "linearization_level" in parameters:  # the setting, not zbsolve's choice by model size
        cpsat_model.LP_FREE_FROM_OPS = float("inf")
    return run_instance(suite, index, time_limit, workers, "cpsat", seed=seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--suite", default="standard", choices=list(SUITES), help="where the instances come from")
    parser.add_argument("--only", nargs="*", help="instance names (default: six chosen ones of the standard suite, "
                                                  "all of another suite)")
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS),
                        help="settings to run (default: all)")
    parser.add_argument("--seeds", type=seed_list, default=[0], help="CP-SAT seeds, comma-separated: each cell "
                                                                      "runs once per seed (default 0)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "parameters.md"))
    args = parsed(parser)
    names = [instance.name for instance in SUITES[args.suite]()]
    chosen = args.only or (list(INSTANCES) if args.suite == "standard" else names)
    unknown = [name for name in chosen if name not in names]
    if unknown:
        print(f"not in the {args.suite} suite: {', '.join(map(repr, unknown))}", file=sys.stderr)
        return 2
    rows = []
    for name in chosen:
        index = names.index(name)
        for setting in args.settings:
            for seed in args.seeds:
                print(f"{name} / {setting} / seed {seed} ...", end=" ", flush=True)
                row = in_child(run_with, SETTINGS[setting], args.suite, index, args.time_limit, args.workers, seed)
                row.update(setting=setting, instance=name, seed=seed)
                print(row.get("error") or f"{fmt(row['solved'])} (gap {row['gap']:.2%}, {row['total_s']} s)",
                      flush=True)
                rows.append(row)
    Path(args.out).write_text("\n".join(report(args, rows)) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def seed_list(text: str) -> list[int]:
    from zbsolve.solvers import MAX_SEED

    seeds = integer_list(text, "seeds", 0, MAX_SEED)
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must be distinct, got {text!r}")
    return seeds


def report(args: argparse.Namespace, rows: list[dict]) -> list[str]:
    """The markdown: every run, then (with several seeds) each cell's mean and range."""
    m = machine()
    runs = "One run per cell" if len(args.seeds) == 1 else f"One run per cell and seed ({len(args.seeds)} seeds)"
    lines = [
        "# CP-SAT parameter settings", "",
        f"{args.time_limit:g} s per solve, {args.workers} worker(s); run "
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}. Machine: {m['cpu']}, {m['cores']} cores; "
        f"OR-Tools {m['ortools']}. {runs}: with more than one worker the search is not "
        "repeatable, so differences of a few hundredths of a percent are noise.", "",
    ]
    lines += markdown_table(
        ["instance", "setting", "seed", "solved", "bound", "gap", "status", "best (s)", "total (s)"],
        [[row["instance"], row["setting"], row["seed"], f"error: {row['error']}"] if "error" in row else
         [row["instance"], row["setting"], row["seed"], fmt(row["solved"]), fmt(row["bound"]), f"{row['gap']:.2%}",
          row["status"], row["best_solution_s"], row["total_s"]] for row in rows])
    if len(args.seeds) > 1:
        lines += ["", "Each cell over its seeds (runs that ended in an error left out):", ""]
        lines += markdown_table(["instance", "setting", "runs", "mean solved", "best", "worst", "mean gap"],
                                cell_summary(rows))
    return lines


def cell_summary(rows: list[dict]) -> list[list]:
    """Per (instance, setting), in the order they first ran: the runs without an error, and
    their mean, least and most solved value and mean gap."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        cells.setdefault((row["instance"], row["setting"]), []).append(row)
    summary = []
    for (instance, setting), runs in cells.items():
        done = [row for row in runs if "error" not in row]
        if not done:
            summary.append([instance, setting, 0, "-", "-", "-", "-"])
            continue
        values = [row["solved"] for row in done]
        gap = sum(row["gap"] for row in done) / len(done)
        summary.append([instance, setting, len(done), fmt(sum(values) / len(values)), fmt(min(values)),
                        fmt(max(values)), f"{gap:.2%}"])
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
