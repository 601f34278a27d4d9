"""What a solver backend returns, and small helpers for reading it."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class BackendResult:
    status: str  # optimal | feasible | infeasible | unknown
    starts: dict[Op, int] | None
    objective: int | None
    bound: float | None  # solver units, may be fractional (LP bound)
    wall_time: float
    message: str | None = None
    interrupted: bool = False
    pairs: list[tuple[Op, Op]] = field(default_factory=list)  # (F, B or BW) run as overlapped pairs
