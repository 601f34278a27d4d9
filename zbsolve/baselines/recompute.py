"""Hand-made schedules with every microbatch recomputed (the recompute lever, docs/design.md,
"Memory levers"), as a runtime with full activation checkpointing runs them: each forward
keeps only its checkpoint (FC), and the forward runs again (R) just before its backward."""

from __future__ import annotations

from collections.abc import Callable

from zbsolve.problem.op_kinds import Kind, Op
from zbsolve.problem.problem import Problem

Orders = list[list[Op]]


def recomputed_order(order: list[Op], chosen: Callable[[Op], bool] = lambda _op: True) -> list[Op]:
    """A device's order with the microbatch-stages `chosen` recomputed: the F an FC, and an R
    right before the backward that needs it (B or BW)."""
    ops: list[Op] = []
    for op in order:
        if not isinstance(op, Op):  # an overlapped pair: these schedules have none
            raise ValueError("recomputation in a schedule with overlapped pairs is not made")
        if chosen(op) and op.kind == Kind.F.value:
            ops.append(op.with_kind(Kind.FC.value))
            continue
        if chosen(op) and op.kind in (Kind.B.value, Kind.BW.value):
            ops.append(op.with_kind(Kind.R.value))
        ops.append(op)
    return ops


def recomputed_orders(orders: Orders) -> Orders:
    """The same orders with every microbatch recomputed at every stage."""
    return [recomputed_order(order) for order in orders]


def recomputing(build: Callable[[Problem], list]) -> Callable[[Problem], list]:
    """A baseline's builder with every microbatch recomputed."""
    return lambda problem: recomputed_orders(build(problem))


def needs_recompute(problem: Problem) -> str | None:
    return None if "recompute" in problem.levers else "needs the recompute lever (--levers recompute)"
