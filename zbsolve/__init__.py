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
from zbsolve.ops import Op, OpGraph
from zbsolve.placements import build_problem
from zbsolve.problem import Pipe, Problem, Stage, StageCost
from zbsolve.profiles import load_profile
from zbsolve.schedule import Metrics, Schedule, SolverInfo, TimedOp
from zbsolve.schedule_file import read_schedule, write_schedule
from zbsolve.simulator import simulate
from zbsolve.solvers import solve
from zbsolve.validate import validate

__version__ = "0.1.0"

__all__ = [
    "InfeasibleError", "Metrics", "Op", "OpGraph", "Pipe", "Problem", "ProblemError", "ProblemWarning",
    "Schedule", "ScheduleError", "ScheduleFileError", "SolverError", "SolverInfo", "Stage", "StageCost",
    "TimedOp", "UsageError", "ValidationError", "ZbsolveError", "applicable", "baseline_names", "build_problem",
    "load_profile", "read_schedule", "run_baseline", "simulate", "solve", "validate", "write_schedule",
]
