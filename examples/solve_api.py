"""Build a problem from a profile, solve it, compare with 1F1B and write the files.

    python examples/solve_api.py [--time-limit 20] [--out DIR]
"""

import argparse
import tempfile
from pathlib import Path

from zbsolve import build_problem, load_profile, run_baseline, solve, validate, write_schedule
from zbsolve.formats.torch_csv import write_torch_csv

MODELS = Path(__file__).resolve().parent.parent / "models"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for solved.json and solved.csv (default: a new temporary folder)")
    args = parser.parse_args()

    profile = load_profile(MODELS / "zb-1.5b.json")
    P, M = 4, 12
    problem = build_problem(P, M, profile.rank_costs(P), comm=profile.comm, memory="1x",
                            time_unit=profile.time_unit)
    solved = solve(problem, "cpsat", time_limit=args.time_limit)
    validate(solved)
    one_f_one_b = run_baseline("1f1b", problem)
    m = solved.metrics
    print(f"solved ({solved.solver.status}, gap {100 * solved.solver.gap:.2f}%): makespan {m.makespan:g} "
          f"{problem.time_unit}, bubble {100 * m.bubble_rate:.2f}%, peak {m.peak_memory_x:.2f}x U")
    print(f"1F1B: makespan {one_f_one_b.metrics.makespan:g} {problem.time_unit}; "
          f"speed-up {one_f_one_b.metrics.makespan / m.makespan:.3f}x")
    out = args.out or Path(tempfile.mkdtemp(prefix="zbsolve-example-"))
    write_schedule(solved, out / "solved.json")
    write_torch_csv(solved, out / "solved.csv")
    print(f"wrote {out / 'solved.json'} and {out / 'solved.csv'}")


if __name__ == "__main__":
    main()
