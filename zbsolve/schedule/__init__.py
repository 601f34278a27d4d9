"""The schedule object, the simulator that times per-device orders, and the validator."""

from zbsolve.schedule.schedule import Metrics, Schedule, SolverInfo, TimedOp
from zbsolve.schedule.simulator import simulate
from zbsolve.schedule.validator import validate

__all__ = ["Metrics", "Schedule", "SolverInfo", "TimedOp", "simulate", "validate"]
