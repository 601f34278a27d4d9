"""Ops and the op graph derived once from a problem (docs/design.md, "Semantics").

Times and memory amounts are turned into integers on a grid: the coarsest power of ten
(at most 10^6 per unit) on which every given value is whole, so integer arithmetic on it
is exact for inputs with up to six decimals; failing that, the coarsest n x 10^k
(n <= 12, k <= 6), so that a cost split over n chunks (a third of 0.1 ms on interleaved:3)
stays exact too. Values that fit neither are put on 10^-6 of their unit: times rounded to
nearest, memory amounts rounded down, so that a schedule that fits the limit exactly
also fits it on the grid (a limit is never claimed broken, nor a problem infeasible,
because of rounding).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from zbsolve.errors import ProblemError
from zbsolve.problem.op_kinds import KINDS, TABLE, Kind, Op, Wait, amount, kinds_of, producer
from zbsolve.problem.problem import Problem
from zbsolve.problem.size import check_size

__all__ = ["KINDS", "Op", "OpGraph", "grid_scale"]  # Op and KINDS live in op_kinds; many read them from here

MAX_GRID_DIGITS = 6
MAX_SHARES = 12  # chunks of one cost that stay exact on the grid
EXACT = 2**53  # ticks beyond this are not exact as floats (and sums of huge costs overflow)
_SCALES = [10**k for k in range(MAX_GRID_DIGITS + 1)] + sorted(  # the order grid_scale tries them in
    {n * 10**k for n in range(2, MAX_SHARES + 1) for k in range(MAX_GRID_DIGITS + 1)}
)


def grid_scale(values: Iterable[float]) -> int:
    """Smallest 10^k (k <= 6) on which every value is a whole number; failing that, the
    smallest n x 10^k (n <= MAX_SHARES); failing both, 10^6 (values are rounded)."""
    values = [float(v) for v in values]
    for scale in _SCALES:
        if all(_whole(v * scale) for v in values):
            return scale
    return 10**MAX_GRID_DIGITS


def _too_large(what: str, unit: str = "") -> str:
    return (f"{what} of {EXACT:,}{' ' + unit if unit else ''} or more are beyond what the grid holds "
            "exactly; give them in a larger unit")


def _whole(x: float) -> bool:
    """Whole up to float noise; a value that is not zero never counts as a whole zero."""
    return abs(x - round(x)) <= 1e-9 * max(1.0, abs(x)) and (x == 0 or round(x) != 0)


# An event another op can wait for: (event, pipe, stage, microbatch); events as in
# op_kinds.Wait ("I" is the stage's input gradient, produced by its B or BW).
Event = tuple[str, int, int, int]


class OpGraph:
    """Durations, dependencies and memory effects of every op of a problem, in ticks."""

    def __init__(self, problem: Problem) -> None:
        check_size(problem)
        self.problem = problem
        costs = problem.stage_costs
        time_values = [v for c in costs for v in (c.F, c.B, c.W, c.fused, c.recompute, c.offload) if v is not None]
        time_values.append(problem.comm)
        if problem.fb_overlap is not None:
            time_values.append(problem.fb_overlap)
        memory_values = [v for c in costs for v in (c.activation, c.residual, c.checkpoint)]
        # Values past the exact range would also overflow on the finer grids (1e308 x 10).
        if max(time_values) >= EXACT:
            raise ProblemError(_too_large("times", problem.time_unit))
        if max(memory_values) >= EXACT:
            raise ProblemError(_too_large("memory amounts"))
        self.time_scale = grid_scale(time_values)
        # A limit that large cannot bind (it is above all activations at once, see below).
        limits = [v for v in problem.memory_limit or () if v < EXACT]
        self.memory_scale = grid_scale(memory_values + limits)
        self.comm = self.ticks(problem.comm)
        self.fb_overlap = None if problem.fb_overlap is None else self.ticks(problem.fb_overlap)
        self._durations = [{row.kind.value: self._ticks_of(c, row.duration) for row in TABLE.values()} for c in costs]
        self._memory = [
            (self.memory_ticks(c.activation), self.memory_ticks(c.residual), self.memory_ticks(c.checkpoint))
            for c in costs
        ]
        for k, (c, ticks, (activation, _, _)) in enumerate(zip(costs, self._durations, self._memory)):
            # Amounts below the grid's resolution would vanish: the solvers would see no work, or no memory.
            if ticks["F"] == 0:  # a forward of no length: see StageCost.checked
                raise ProblemError(
                    f"stage cost {k}: F = {c.F:g} {problem.time_unit} is below the time grid's "
                    f"resolution ({1 / self.time_scale:g} {problem.time_unit}); give times in a smaller unit")
            if activation == 0 and c.activation > 0:
                raise ProblemError(
                    f"stage cost {k}: activation {c.activation:g} is below the memory grid's resolution "
                    f"({1 / self.memory_scale:g} of the memory unit); give memory in a smaller unit")
        held = self._check_magnitudes()
        # No level exceeds all activations at once: a larger limit (1e300, say) is that much.
        self.memory_limit = (
            None if problem.memory_limit is None
            else [min(math.floor(v * self.memory_scale + 1e-6), held) if v < EXACT else held
                  for v in problem.memory_limit]
        )

    def _check_magnitudes(self) -> int:
        """Every time and memory level a schedule can reach stays an integer a float holds
        exactly (2^53 ticks): beyond that the grid is not exact, and near 1e308 the sums of
        finite costs overflow. Returns the activations of all ops together, in ticks."""
        problem = self.problem
        per_microbatch = [
            sum(self._durations[s.cost]["F"] + self._durations[s.cost]["BW"] + self.comm for s in pipe.stages)
            for pipe in problem.pipes
        ]
        total = sum(n * len(pipe.microbatches) for n, pipe in zip(per_microbatch, problem.pipes))
        if max(total, self.fb_overlap or 0) >= EXACT:
            raise ProblemError(
                f"the times add up to more than the time grid holds exactly ({EXACT:,} steps of "
                f"{1 / self.time_scale:g}, {EXACT / self.time_scale:g} {problem.time_unit}); "
                "give times in a larger unit")
        held = sum(self._memory[s.cost][0] * len(pipe.microbatches) for pipe in problem.pipes for s in pipe.stages)
        if held >= EXACT:
            raise ProblemError(
                f"the activations add up to more than the memory grid holds exactly ({EXACT:,} steps of "
                f"{1 / self.memory_scale:g}, {EXACT / self.memory_scale:g}); give memory in a larger unit")
        return held

    def _ticks_of(self, cost, field: str) -> int:
        """A kind's duration field of a cost record, in ticks: BW is the fused time where the
        problem fuses the backward and the costs give one, else B + W, each rounded."""
        if field == Kind.BW.value:
            if cost.fused is not None and not self.problem.split_backward:
                return self.ticks(cost.fused)
            return self.ticks(cost.B) + self.ticks(cost.W)
        if field == "recompute":
            return self.ticks(cost.recompute_time)
        if field == "offload":  # a copy's time; a problem without the offload lever may not give one
            return self.ticks(cost.offload or 0.0)
        return self.ticks(getattr(cost, field))

    def ticks(self, value: float) -> int:
        return round(value * self.time_scale)

    def memory_ticks(self, value: float) -> int:
        x = value * self.memory_scale
        return round(x) if _whole(x) else math.floor(x)  # off the grid: never more than it is

    def time(self, ticks: float) -> float:
        return ticks / self.time_scale

    def memory(self, ticks: int) -> float:
        return ticks / self.memory_scale

    # Structure

    def device(self, op: Op) -> int:
        return self.problem.pipes[op.pipe].stages[op.stage].device

    def duration(self, op: Op) -> int:
        return self._durations[self.problem.pipes[op.pipe].stages[op.stage].cost][op.kind]

    def memory_effect(self, op: Op) -> tuple[int, int]:
        """(amount allocated at the op's start, amount released at its end), in memory ticks."""
        activation, residual, checkpoint = self._memory[self.problem.pipes[op.pipe].stages[op.stage].cost]
        row = TABLE[op.kind]
        return (amount(row.allocates, activation, residual, checkpoint),
                amount(row.frees, activation, residual, checkpoint))

    def stage_memory(self, pipe: int, stage: int) -> tuple[int, int, int]:
        """(activation, residual, checkpoint) of a stage, in memory ticks."""
        return self._memory[self.problem.pipes[pipe].stages[stage].cost]

    def backward_kinds(self, split: bool | None = None) -> tuple[str, ...]:
        split = self.problem.split_backward if split is None else split
        return kinds_of(split)[1:]

    def ops(self, split: bool | None = None) -> list[Op]:
        """Every op of the problem with backward split into B and W (or fused as BW)."""
        kinds = kinds_of(self.problem.split_backward if split is None else split)
        return [
            Op(kind, q, k, i)
            for q, pipe in enumerate(self.problem.pipes)
            for k in range(len(pipe.stages))
            for i in pipe.microbatches
            for kind in kinds
        ]

    def hop(self, pipe: int, a: int, b: int) -> int:
        """Comm delay between stages a and b of a pipe: zero when they share a device."""
        stages = self.problem.pipes[pipe].stages
        return 0 if stages[a].device == stages[b].device else self.comm

    def produces(self, op: Op) -> tuple[Event, ...]:
        return tuple((event, op.pipe, op.stage, op.microbatch) for event in TABLE[op.kind].produces)

    def requirements(self, op: Op) -> list[tuple[Event, int]]:
        """Events the op waits for, each with the delay after it (docs/design.md, "Dependencies")."""
        q, k, i = op.pipe, op.stage, op.microbatch
        stages = len(self.problem.pipes[q].stages)
        found = []
        for wait in TABLE[op.kind].waits:
            if wait.levers and not set(wait.levers) & set(self.problem.levers):
                continue
            at: Wait | None = wait
            while at is not None and not 0 <= k + at.offset < stages:
                at = at.otherwise
            if at is not None:
                found.append(((at.event, q, k + at.offset, i), self.hop(q, k + at.offset, k)))
        return found

    def predecessors(self, op: Op, split: bool | None = None) -> list[tuple[Op, int]]:
        """requirements() resolved to ops for a fixed choice of backward kinds (solvers)."""
        split = self.problem.split_backward if split is None else split
        return [(Op(producer(event, split), q, k, i), delay) for (event, q, k, i), delay in self.requirements(op)]
