"""What a solver backend returns, and small helpers for reading it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from zbsolve.problem.op_graph import Op


def joined_notes(*parts: str | None) -> str | None:
    """Notes for a result's message, the empty ones left out."""
    return "; ".join(part for part in parts if part) or None


def partners(pairs) -> dict[Op, Op]:
    """Each half of the overlapped (F, backward) pairs mapped to the other."""
    partner: dict[Op, Op] = {}
    for f, b in pairs:
        partner[f], partner[b] = b, f
    return partner


class Status(str, Enum):
    """What a backend says of its answer."""

    OPTIMAL = "optimal"  # a schedule, proven best: `bound` meets it
    FEASIBLE = "feasible"  # a schedule, not proven best
    INFEASIBLE = "infeasible"  # proven: no schedule keeps the memory limit
    UNKNOWN = "unknown"  # no schedule (the limit ran out, or a stop came, before one was found)


@dataclass
class BackendResult:
    status: Status
    starts: dict[Op, int] | None
    objective: int | None
    bound: float | None  # solver units, may be fractional (LP bound)
    wall_time: float
    message: str | None = None
    interrupted: bool = False
    pairs: list[tuple[Op, Op]] = field(default_factory=list)  # (F, B or BW) run as overlapped pairs
