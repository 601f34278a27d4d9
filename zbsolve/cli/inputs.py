"""Schedules read from files: zbsolve's JSON (which holds its problem) or a torch
compute_only CSV (timed on the problem the usual options or a profile give)."""

from __future__ import annotations

import argparse

from zbsolve.errors import UsageError
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.formats.torch_csv import read_torch_csv
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule

from .options import problem_from_args


def is_csv(path: str) -> bool:
    return str(path).lower().endswith(".csv")


def read_any(path: str, args: argparse.Namespace, problem: Problem | None = None) -> Schedule:
    """The schedule in `path`. A CSV needs the problem (`problem`, or one built from the
    options); a JSON file holds its own, and problem options beside it are refused."""
    if is_csv(path):
        if problem is None:
            if getattr(args, "stages", None) is None and getattr(args, "profile", None) is None:
                raise UsageError(f"{path} is a torch CSV, which holds no problem: give --stages and "
                                 "--microbatches (and the costs, or a --profile)")
            problem = problem_from_args(args)
        return read_torch_csv(path, problem)
    if problem is None and (getattr(args, "stages", None) is not None or getattr(args, "profile", None)):
        raise UsageError(f"{path} is a schedule file, which holds its problem: the problem options are for a "
                         "torch CSV")
    return read_schedule(path)


def read_for(path: str, args: argparse.Namespace, problem: Problem) -> Schedule:
    """A schedule of `problem` from `path` (JSON or CSV), refused if it is of another problem."""
    schedule = read_any(path, args, problem)
    if schedule.problem != problem:
        raise UsageError(f"{path} is a schedule of another problem than the one the options give")
    return schedule
