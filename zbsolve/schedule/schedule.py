"""The one schedule object every baseline, solver and file reader produces (docs/formats.md, "Schedule file")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from zbsolve.problem.op_graph import Op
from zbsolve.problem.problem import Problem

STATUSES = ("optimal", "feasible", "infeasible", "unknown", "baseline", "interrupted", "measured")

# One entry of a device's order: a single op, or an overlapped F&B pair (docs/design.md, "F&B overlap").
Slot = tuple[Op, ...]


@dataclass(frozen=True)
class TimedOp:
    op: Op
    start: float
    end: float
    overlap: int | None = None  # pair id shared by the two halves of an overlapped F&B pair


@dataclass(frozen=True)
class Metrics:
    """docs/design.md, "Metrics". Times in the problem's unit; peak_memory_x is the largest peak over U."""

    makespan: float
    bubble_rate: float
    span: float
    span_bubble_rate: float
    busy: tuple[float, ...]
    peak_memory: tuple[float, ...]
    peak_memory_x: float


@dataclass(frozen=True)
class SolverInfo:
    name: str
    status: str = "baseline"
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    wall_time_s: float | None = None
    time_limit_s: float | None = None
    message: str | None = None


@dataclass(frozen=True)
class Schedule:
    name: str
    problem: Problem
    devices: tuple[tuple[TimedOp, ...], ...]
    metrics: Metrics
    solver: SolverInfo = field(default_factory=lambda: SolverInfo("baseline"))

    def order(self) -> list[list[Slot]]:
        """Per-device execution order, overlapped pairs as one slot."""
        orders: list[list[Slot]] = []
        for ops in self.devices:
            slots: list[Slot] = []
            for j, timed in enumerate(ops):
                paired = (
                    timed.overlap is not None and j > 0 and len(slots[-1]) == 1
                    and ops[j - 1].overlap == timed.overlap
                )
                if paired:
                    slots[-1] = (slots[-1][0], timed.op)
                else:
                    slots.append((timed.op,))
            orders.append(slots)
        return orders

    @property
    def value(self) -> float:
        """The problem's objective for this schedule: its span or its makespan."""
        return self.metrics.span if self.problem.objective == "span" else self.metrics.makespan

    def with_solver(self, solver: SolverInfo, name: str | None = None) -> Schedule:
        return replace(self, solver=solver, name=name or self.name)

    def recomputed(self) -> int:
        """How many microbatch-stages it recomputes (its R ops: the recompute lever)."""
        return sum(1 for ops in self.devices for t in ops if t.op.kind == "R")

    def offloaded(self) -> int:
        """How many microbatch-stages it offloads (its O ops: the offload lever)."""
        return sum(1 for ops in self.devices for t in ops if t.op.kind == "O")

    def over_memory_limit(self) -> list[int]:
        """Devices whose peak exceeds the problem's memory limit (tolerance 1e-9 relative)."""
        limit = self.problem.memory_limit
        if limit is None:
            return []
        return [
            d for d, peak in enumerate(self.metrics.peak_memory)
            if peak > limit[d] * (1 + 1e-9)
        ]

