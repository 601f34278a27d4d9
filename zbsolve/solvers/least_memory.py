"""A second phase after a solve: among schedules as fast as the one found, the one with the
least peak memory (docs/solving.md, "Least memory at equal speed").

The limit is bisected between what one microbatch needs and the found schedule's peak;
each step solves the problem under that limit. A step that finds a schedule no slower
lowers the upper end (to that schedule's own peak); one whose search proves that nothing
that fast fits (infeasible, or a bound above the value) raises the lower end, proven; any
other raises it unproven. The result keeps the first phase's status, bound and gap (they
are of the objective under the problem's own limit) and says what the phase proved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from zbsolve.errors import InfeasibleError, SolverError
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule

from .orchestration import minimum_memory

STEPS = 6
RESOLUTION = 0.005  # of the found peak: closer ends are not worth another solve


@dataclass(frozen=True)
class MemoryPhase:
    schedule: Schedule  # the least-memory schedule found, of the original problem
    before: float  # the first phase's peak (largest device)
    after: float
    below: float | None  # a limit tried below `after` where nothing as fast was found
    proven: bool  # whether nothing as fast fits under `below` was proven

    def describe(self) -> str:
        p = self.schedule.problem
        text = f"least memory at equal speed: peak {p.memory_text(self.after)}, was {p.memory_text(self.before)}"
        if self.below is None:
            return text + "; nothing lower was tried"
        how = "proven" if self.proven else "not proven: the search there found none in its time"
        return text + f"; none as fast found under {p.memory_text(self.below)} ({how})"


def least_memory(problem: Problem, found: Schedule, run: Callable[[Problem], Schedule],
                 steps: int = STEPS, stopped: Callable[[], bool] = lambda: False) -> MemoryPhase:
    """`run` solves a problem (a tighter-limit copy of `problem`) and returns its schedule,
    or raises InfeasibleError / SolverError; `stopped` ends the phase between steps."""
    target = found.value * (1 + 1e-9)
    peak = max(found.metrics.peak_memory)
    low, high, best = max(minimum_memory(problem)), peak, found
    below, proven = None, False
    for _ in range(steps):
        if high - low <= RESOLUTION * peak or stopped():
            break
        middle = (low + high) / 2
        limits = tuple(min(middle, own) for own in (problem.memory_limit or (middle,) * problem.devices))
        try:
            attempt = run(replace(problem, memory_limit=limits))
        except InfeasibleError:
            low, below, proven = middle, middle, True
            continue
        except SolverError:
            low, below, proven = middle, middle, False
            continue
        if attempt.value <= target:
            best, high = attempt, min(middle, max(attempt.metrics.peak_memory))
        else:
            bound = attempt.solver.bound
            low, below, proven = middle, middle, bound is not None and bound > target
    if best is found:
        return MemoryPhase(found, peak, peak, below, proven)
    info = found.solver
    kept = replace(best, problem=problem, name=found.name)
    gap = (kept.value - info.bound) / kept.value if info.bound is not None and kept.value else info.gap
    kept = kept.with_solver(replace(info, objective=kept.value, gap=gap))
    return MemoryPhase(kept, peak, max(kept.metrics.peak_memory), below, proven)
