"""A backend's start times turned into a schedule: its per-device order, re-timed by the
simulator with the exact costs (docs/design.md, "Time")."""

from __future__ import annotations

from zbsolve.problem.op_graph import KINDS, Op, OpGraph
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate

from .result import BackendResult, partners
from .view import ProblemView


def retimed(graph: OpGraph, data: ProblemView, result: BackendResult, name: str) -> Schedule:
    """A backend's schedule re-timed with exact costs, in its order: no op starts later.
    For span, each device's first op stays where the backend put it (starting it earlier
    could only lengthen that device's span)."""
    orders = device_orders(result, data)
    release = None
    if data.lever_graph is not None and "offload" in data.lever_graph.problem.levers:
        # copies run beside compute: started earlier, a reload could hold memory the backend's
        # times keep free, so every op starts where the backend put it (its times are exact)
        release = {op: start * data.unit for op, start in _starts(result).items()}
    elif data.objective == "span":
        starts = _starts(result)
        release = {slots[0][0]: starts[slots[0][0]] * data.unit for slots in orders if slots}
    return simulate(graph, orders, name, release=release)


def device_orders(result: BackendResult, data: ProblemView) -> list[list[tuple[Op, ...]]]:
    """Per-device slots in start order; a pair becomes one (F, B or BW) slot, and a split
    backward whose W the pair absorbed runs as the fused BW."""
    starts = _starts(result)
    if data.lever_graph is not None:  # the ops it chose: FC and R where it recomputes
        graph = data.lever_graph
        by_device: list[list[Op]] = [[] for _ in data.device_ops]
        for op in starts:
            by_device[graph.device(op)].append(op)
        # at one start an op of no length runs first; the table's order breaks other ties
        return [[(op,) for op in sorted(ops, key=lambda op: (starts[op], graph.duration(op) > 0, KINDS.index(op.kind),
                                                             op.pipe, op.stage, op.microbatch))]
                for ops in by_device]
    partner = partners(result.pairs)
    absorbed = {b.with_kind("W") for _, b in result.pairs}

    def execution_order(op: Op) -> tuple[int, int, bool, int]:
        # At one start time an op of no length (a W of cost 0) runs first: after a longer op
        # it would start, and free its memory, only when that op ends. Among ops of no length
        # at one instant, those that free memory run before forwards, as the models count
        # them (no dependency runs the other way there: no forward has length 0).
        length = data.pair_length if op in partner else data.duration[op]
        return starts[op], starts[op] + length, op.kind == "F", data.rank[op]

    orders: list[list[tuple[Op, ...]]] = []
    for ops in data.device_ops:
        slots: list[tuple[Op, ...]] = []
        for op in sorted(ops, key=execution_order):
            if op in absorbed or (op in partner and op.kind != "F"):
                continue
            if op in partner:
                b = partner[op]
                slots.append((op, b.with_kind("BW")))
            else:
                slots.append((op,))
        orders.append(slots)
    return orders


def _starts(result: BackendResult) -> dict[Op, int]:
    if result.starts is None:
        raise ValueError("a backend result without a schedule has nothing to re-time")
    return result.starts
