"""MILP backend: PuLP with its bundled CBC; disjunctive ordering binaries only where needed."""

from .model import solve_cbc

__all__ = ["solve_cbc"]
