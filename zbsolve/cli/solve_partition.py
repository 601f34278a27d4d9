"""`zbsolve solve --partition auto`: the layer split chosen with the schedule, one placement
at a time; the splits solved, the comparison table of the chosen one and the answer with its
bound over every split (docs/design.md, "Layer partitions")."""

from __future__ import annotations

import argparse
import signal
import sys

from zbsolve.errors import SolverError, UsageError
from zbsolve.solvers import check_solvable, check_solver_options

from .choices import asked_placements
from .options import problem_parts
from .outputs import baseline_rows, check_outputs, print_comparison, write_outputs
from .partition import asks_auto, layered_problem, partition_lines, solve_partitions
from .solve import install_stop_handlers, run_solve


def run_solve_command(args: argparse.Namespace) -> int:
    """`zbsolve solve`: with --partition auto the split is chosen too."""
    if not asks_auto(args):
        return run_solve(args)
    check_solver_options(args.solver, args.time_limit, args.workers, args.deterministic, args.seed)
    return run_partition_solve(args)


def run_partition_solve(args: argparse.Namespace) -> int:
    for given, option in ((args.start, "--start"), (args.least_memory, "--least-memory")):
        if given:
            raise UsageError(f"--partition auto does not take {option}: each split is a problem of its own "
                             "(solve the chosen split again with --partition N,N,... to use it)")
    placements, auto = asked_placements(args.placement)
    if auto or len(placements) != 1:
        raise UsageError("--partition auto chooses the split for one placement at a time: give one --placement "
                         "(run the command once per placement to compare them)")
    profile, common = problem_parts(args, placements[0], not args.no_split_backward)
    if profile is None or profile.layers is None:
        raise UsageError("--partition needs a --profile that lists layers")
    first = layered_problem(profile, common, None)
    check_solvable(first, args.solver)
    check_outputs(args, first)
    stop = install_stop_handlers()
    answer = solve_partitions(args, profile, common, stop)
    if stop.is_set():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # wrapping up: a second request must not cut the file
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    best = answer.best.schedule
    if best is None and stop.is_set():
        print("zbsolve solve: interrupted before any split had a schedule; nothing written", file=sys.stderr)
        return 130
    if best is None:
        raise SolverError("no split of the layers has a schedule within the limits: try a longer --time-limit or "
                          "a looser --memory")
    for line in partition_lines(answer, best.problem.time_unit):
        print(line)
    print()
    solved = [best.with_solver(best.solver, name="solved, partition " + ",".join(map(str, answer.best.split)))]
    print_comparison("solve", best.problem, solved, baseline_rows(best.problem))
    write_outputs(best, args)
    return 130 if stop.is_set() else 0
