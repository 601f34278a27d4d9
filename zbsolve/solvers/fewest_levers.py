"""A schedule with levers, less every lever use its times do not need (docs/solving.md,
"Memory levers"): the models value the makespan alone, so they may recompute or offload a
microbatch that fits kept, and each such use costs a runtime compute or host traffic that
the model does not count. Each op keeps its start; a use is taken back where its device
still keeps its limit without it, the shortest-lived first. Only that device's level
changes (no op moves), so each try looks at that device alone, and the schedule is timed
once at the end."""

from __future__ import annotations

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import peak_memory, simulate

Key = tuple[int, int, int]  # (pipe, stage, microbatch)
TimedDevice = list[tuple[Op, int, int]]  # a device's ops with start and end, in ticks
LEVER_FORWARDS = ("FC", "FO")  # a forward that a lever changed
ADDED = ("R", "O", "L")  # the ops a lever adds


def with_fewest_levers(graph: OpGraph, schedule: Schedule) -> Schedule:
    """`schedule` with each recomputation or offload that the memory limit does not need
    taken back (kept: an F, no R or copies), no op moved; its value never grows."""
    devices = [[(t.op, graph.ticks(t.start), graph.ticks(t.end)) for t in ops] for ops in schedule.devices]
    timed = {op: (start, end) for ops in devices for op, start, end in ops}
    limits = graph.memory_limit

    def lifetime(op: Op) -> int:  # from the forward's end to the backward's start
        backward = timed.get(op.with_kind("B"), timed.get(op.with_kind("BW")))
        return (backward[0] if backward else timed[op][1]) - timed[op][1]

    taken_back = False
    for forward in sorted((op for op in timed if op.kind in LEVER_FORWARDS), key=lambda op: (lifetime(op), op)):
        d = graph.device(forward)
        trial = without_use(devices[d], (forward.pipe, forward.stage, forward.microbatch))
        if limits is None or fits(graph, trial, limits[d]):
            devices[d], taken_back = trial, True
    if not taken_back:
        return schedule
    release = {op: start for ops in devices for op, start, _ in ops}
    return simulate(graph, [[op for op, _, _ in ops] for ops in devices], schedule.name, solver=schedule.solver,
                    release=release)


def without_use(device: TimedDevice, key: Key) -> TimedDevice:
    """A device's timed ops with microbatch-stage `key` kept: its F for an FC or FO, no R or copies."""
    kept = []
    for op, start, end in device:
        if (op.pipe, op.stage, op.microbatch) == key:
            if op.kind in ADDED:
                continue
            op = op.with_kind("F") if op.kind in LEVER_FORWARDS else op
        kept.append((op, start, end))
    return kept


def fits(graph: OpGraph, device: TimedDevice, limit: int) -> bool:
    """Whether a device's timed ops keep `limit` (ticks)."""
    return peak_memory(graph, [((op,), start, end) for op, start, end in device]) <= limit
