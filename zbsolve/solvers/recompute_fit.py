"""Starting schedules for the recompute lever: a hand-made order with just enough
microbatches recomputed to fit the memory limit (docs/solving.md, "Memory levers").

A device's memory levels depend only on its own order, not on the times. Walking it, where a
level would pass the limit, the microbatch-stage held whole whose backward comes last is
recomputed (its forward becomes an FC, an R runs right before its backward), and the walk
starts again; the farthest backward frees its memory latest, the choice that relieves the
most of the order ahead (as a cache evicts the entry needed last)."""

from __future__ import annotations

from zbsolve.baselines.recompute import recomputed_order
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.op_kinds import Kind
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate

Key = tuple[int, int, int]  # (pipe, stage, microbatch)


def _key(op: Op) -> Key:
    return op.pipe, op.stage, op.microbatch


def _fitted(graph: OpGraph, order: list[Op], limit: int) -> list[Op] | None:
    """The device's order with the fewest-first recomputations that keep it within `limit`
    (ticks), or None when even recomputing every microbatch would not."""
    recomputed: set[Key] = set()
    while True:
        level, held, over = 0, {}, None  # held: whole activations by key, their backward's place
        ops = recomputed_order(order, lambda op: _key(op) in recomputed)
        backward_at = {_key(op): j for j, op in enumerate(ops) if op.kind in (Kind.B.value, Kind.BW.value)}
        for op in ops:
            allocated, released = graph.memory_effect(op)
            level += allocated
            if op.kind == Kind.F.value:
                held[_key(op)] = backward_at.get(_key(op), len(ops))
            if level > limit:
                over = op
                break
            level -= released
            if op.kind in (Kind.B.value, Kind.BW.value):
                held.pop(_key(op), None)
        if over is None:
            return ops
        if not held:
            return None
        recomputed.add(max(held, key=lambda key: held[key]))


def fitted_with_recomputation(graph: OpGraph, schedule: Schedule) -> Schedule | None:
    """`schedule`'s order (no overlapped pairs) with the recomputations its devices need to fit
    the problem's limit, timed; None where none is needed or none fits."""
    limits = graph.memory_limit
    if limits is None or not schedule.over_memory_limit() or any(len(slot) != 1 for o in schedule.order()
                                                                 for slot in o):
        return None
    orders = []
    for d, device in enumerate(schedule.devices):
        fitted = _fitted(graph, [t.op for t in device], limits[d])
        if fitted is None:
            return None
        orders.append(fitted)
    found = simulate(graph, orders, f"{schedule.name} recomputed to fit")
    return None if found.over_memory_limit() else found
