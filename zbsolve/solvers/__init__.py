"""Solve a problem with an integer program and return a validated schedule (docs/solving.md).

The backend's per-device order is re-timed by the simulator with the exact costs, checked
by the independent validator, and compared with the best hand-made schedule that fits
the memory limit, which also serves as the warm start.
"""

from .orchestration import (
    check_memory_feasible,
    check_solvable,
    check_solver_options,
    lower_bound,
    minimum_memory,
    solve,
    with_bound,
)
from .registry import names as solver_names
from .settings import runs_deterministic

__all__ = ["solve", "lower_bound", "with_bound", "minimum_memory", "check_memory_feasible", "check_solvable",
           "check_solver_options", "runs_deterministic", "solver_names"]
