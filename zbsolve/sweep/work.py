"""One point's work, run in a pool process or a Ray task: every baseline that fits, then the
solve; the schedule comes back as its file's text, and the driver alone writes files."""

from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
import time

from zbsolve.baselines import applicable, run_baseline
from zbsolve.errors import InfeasibleError, SolverError
from zbsolve.formats.schedule_json import dumps
from zbsolve.problem import partition
from zbsolve.schedule.schedule import Schedule
from zbsolve.solvers import solve
from zbsolve.solvers.partition_search import search

from .grid import CostModel, Point, from_dict, layered_problems, problem_of


def worker_start(driver: int) -> None:
    """A pool process leaves Ctrl-C to the driver, which stops it and keeps the store whole,
    and ends with the driver: killed, the driver leaves no worker to finish its point and
    write broken-pipe tracebacks to the terminal (Linux's parent-death signal; elsewhere the
    worker ends when it next reads its queue)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != driver:  # the driver was gone before the signal was asked for
            os._exit(0)


def _row(schedule: Schedule, seconds: float) -> dict:
    info, limit = schedule.solver, schedule.problem.memory_limit
    return {
        "value": schedule.value, "bound": info.bound if info else None, "gap": info.gap if info else None,
        "status": info.status if info else "baseline", "makespan": schedule.metrics.makespan,
        "span": schedule.metrics.span, "peak_memory": list(schedule.metrics.peak_memory),
        "peak_x": schedule.metrics.peak_memory_x, "fits": not schedule.over_memory_limit(),
        "limit": None if limit is None else list(limit), "seconds": round(seconds, 3),
    }


def solve_point(task: dict) -> dict:
    """`task`: the point's fields, its costs (`grid.to_dict`) and the solver settings.
    Returns the rows by name ("solved" and each baseline) and the solved schedule's text."""
    point = Point(**task["point"])
    costs = from_dict(task["costs"])
    if point.partition == "auto":
        return _solve_partitions(point, costs, task["solver"])
    problem = problem_of(point, costs)
    rows: dict[str, dict] = {}
    timed = []
    for name in applicable(problem):
        began = time.monotonic()
        schedule = run_baseline(name, problem)
        timed.append(schedule)
        rows[name] = _row(schedule, time.monotonic() - began)
    settings = task["solver"]
    began = time.monotonic()
    try:
        solved = solve(problem, settings["solver"], time_limit=settings["time_limit"],
                       workers=settings["workers"], seed=settings["seed"],
                       deterministic=settings["deterministic"], baselines=timed)
    except InfeasibleError as error:
        return {"rows": rows, "status": "infeasible", "message": str(error), "schedule": None}
    except SolverError as error:
        return {"rows": rows, "status": "unknown", "message": str(error), "schedule": None}
    rows["solved"] = _row(solved, time.monotonic() - began)
    return {"rows": rows, "status": rows["solved"]["status"], "message": solved.solver.message,
            "schedule": dumps(solved)}


def _solve_partitions(point: Point, costs: CostModel, settings: dict) -> dict:
    """An `auto` point: the split chosen with the schedule (`partition_search.search`); rows
    for the chosen split's schedule, bounded over every split, for the splits users run
    (`even split, solved` ...) and for the baselines on the chosen split."""
    assert costs.layer_costs is not None
    stages = partition.stage_count(point.placement, point.devices, point.microbatches)
    began = time.monotonic()
    answer = search(costs.layer_costs, stages, layered_problems(point, costs), solver=settings["solver"],
                    time_limit=settings["time_limit"], workers=settings["workers"], seed=settings["seed"],
                    deterministic=settings["deterministic"])
    seconds = time.monotonic() - began
    rows = {f"{found.name} split, solved": _row(found.schedule, found.schedule.solver.wall_time_s or 0.0)
            for found in answer.named if found.schedule is not None}
    best = answer.best.schedule
    if best is None:
        proven = math.isinf(answer.bound)  # infinite only where every split was proven not to fit
        return {"rows": rows, "status": "infeasible" if proven else "unknown", "schedule": None,
                "message": f"no split of the layers fits the memory limit (all {answer.splits} proven)" if proven
                           else f"none of the {len(answer.solved)} splits solved of {answer.splits} had a schedule "
                                "within the limits"}
    for name in applicable(best.problem):
        began = time.monotonic()
        rows[name] = _row(run_baseline(name, best.problem), time.monotonic() - began)
    chosen = answer.bounded()
    assert chosen is not None and chosen.solver.message is not None
    rows["solved"] = _row(chosen, seconds)
    return {"rows": rows, "status": chosen.solver.status, "message": chosen.solver.message, "schedule": dumps(chosen)}
