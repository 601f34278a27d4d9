"""OR-Tools CP-SAT backend: one interval per op, NoOverlap and cumulative memory per device."""

from .model import solve_cpsat

__all__ = ["solve_cpsat"]
