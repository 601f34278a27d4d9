"""Sweeps: solve a grid of configurations into a SQLite store, locally or on Ray, and find
the memory-time frontier (docs/sweeps.md)."""

from .driver import SolverSettings, run_sweep, store_settings
from .frontier import Frontier, frontier
from .grid import CostModel, Point, cost_model, points
from .store import Store

__all__ = ["CostModel", "Frontier", "Point", "SolverSettings", "Store", "cost_model", "frontier", "points",
           "run_sweep", "store_settings"]
