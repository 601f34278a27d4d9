"""zbsolve: optimal pipeline-parallel schedules for your own costs, with proofs.

    from zbsolve import StageCost, build_problem, solve
    problem = build_problem(4, 8, StageCost(1, 1, 1), memory="1x")
    schedule = solve(problem)
"""

from zbsolve.baselines import applicable, baseline_names, run_baseline
from zbsolve.errors import (
    InfeasibleError,
    ProblemError,
    ProblemWarning,
    ScheduleError,
    ScheduleFileError,
    SolverError,
    UsageError,
    ValidationError,
    ZbsolveError,
)
from zbsolve.formats.schedule_json import read_schedule, write_schedule
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost
from zbsolve.problem.profiles import load_profile
from zbsolve.schedule.schedule import Metrics, Schedule, SolverInfo, TimedOp
from zbsolve.schedule.simulator import simulate
from zbsolve.schedule.validator import validate
from zbsolve.solvers import solve
from zbsolve.version import __version__

__all__ = [
    "__version__", "InfeasibleError", "Metrics", "Op", "OpGraph", "Pipe", "Problem", "ProblemError", "ProblemWarning",
    "Schedule", "ScheduleError", "ScheduleFileError", "SolverError", "SolverInfo", "Stage", "StageCost",
    "TimedOp", "UsageError", "ValidationError", "ZbsolveError", "applicable", "baseline_names", "build_problem",
    "load_profile", "read_schedule", "run_baseline", "simulate", "solve", "validate", "write_schedule",
]
