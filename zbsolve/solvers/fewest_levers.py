"""A schedule with levers, less every lever use its times do not need (docs/solving.md,
"Memory levers"): the models value the makespan alone, so they may recompute or offload a
microbatch that fits kept, and each such use costs a runtime compute or host traffic that
the model does not count. Each op keeps its start; a use is taken back where the limit still
holds without it, the shortest-lived first."""

from __future__ import annotations

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate

Key = tuple[int, int, int]  # (pipe, stage, microbatch)
LEVER_FORWARDS = ("FC", "FO")  # a forward that a lever changed
ADDED = ("R", "O", "L")  # the ops a lever adds


def with_fewest_levers(graph: OpGraph, schedule: Schedule) -> Schedule:
    """`schedule` with each recomputation or offload that the memory limit does not need
    taken back (kept: an F, no R or copies), no op moved; its value never grows."""
    timed = {t.op: t for ops in schedule.devices for t in ops}
    forwards = [op for op in timed if op.kind in LEVER_FORWARDS]

    def lifetime(op: Op) -> float:  # from the forward's end to the backward's start
        backward = timed.get(op.with_kind("B"), timed.get(op.with_kind("BW")))
        return (backward.start if backward else timed[op].end) - timed[op].end

    current = schedule
    for forward in sorted(forwards, key=lambda op: (lifetime(op), op)):
        candidate = _kept(graph, current, (forward.pipe, forward.stage, forward.microbatch))
        if not candidate.over_memory_limit() and candidate.value <= current.value:
            current = candidate
    return current


def _kept(graph: OpGraph, schedule: Schedule, key: Key) -> Schedule:
    orders: list[list[Op]] = []
    release: dict[Op, int] = {}
    for ops in schedule.devices:
        order = []
        for t in ops:
            op = t.op
            if (op.pipe, op.stage, op.microbatch) == key:
                if op.kind in ADDED:
                    continue
                if op.kind in LEVER_FORWARDS:
                    op = op.with_kind("F")
            order.append(op)
            release[op] = graph.ticks(t.start)
        orders.append(order)
    return simulate(graph, orders, schedule.name, solver=schedule.solver, release=release)
