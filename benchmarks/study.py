"""What the one-instance studies (one_device.py, periodic.py) share: their common arguments,
the instance they name, and how they write their results."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.instances import SUITES


def one_instance_arguments(doc: str, out: Path, time_limit: float, per: str) -> argparse.ArgumentParser:
    """A parser with the instance's name, --suite, --time-limit (seconds per `per`),
    --workers and --out; the study adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("instance", help="an instance's exact name, e.g. 'zb-1.5b vshape 0.5x'")
    parser.add_argument("--suite", default="standard", choices=sorted(SUITES))
    parser.add_argument("--time-limit", type=float, default=time_limit,
                        help=f"seconds per {per} (default {time_limit:g})")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(out), help="output folder")
    return parser


def chosen_problem(suite: str, name: str):
    """The named instance's problem, or None after saying on stderr that there is none."""
    chosen = [i for i in SUITES[suite]() if i.name == name]
    if not chosen:
        print(f"no instance of the {suite} suite is named {name!r}", file=sys.stderr)
        return None
    return chosen[0].build()


def positive_values(text: str) -> list[float] | None:
    """The numbers in a comma-separated option (none when it is empty); None unless each is
    a positive number."""
    try:
        found = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        return None
    return found if all(value > 0 for value in found) else None


def run_cpsat(model, time_limit: float, workers: int):
    """CP-SAT on `model` within the limit: the solver, its status code, whether a solution
    was found, and the seconds it took."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = int(workers)
    t0 = time.monotonic()
    code = solver.Solve(model)
    return solver, code, code in (cp_model.OPTIMAL, cp_model.FEASIBLE), round(time.monotonic() - t0, 2)


def write_study(out: str, stem: str, payload: dict, markdown: str) -> None:
    """DIR/stem.json and DIR/stem.md."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    (folder / f"{stem}.md").write_text(markdown, encoding="utf-8")
    print(f"wrote {folder / f'{stem}.md'}")
