"""An order over the memory limit, offloaded just enough to fit (the offload lever,
docs/solving.md, "Memory levers"): the list scheduler's answer with that lever.

The compute order and times stay; copies are placed as the PipeOffload rule places them
(`baselines.offload.with_copies`: to host right after the forward, back as late as the
backward allows), so compute waits for nothing. Walking the timed schedule, at the first
instant a device's level passes its limit, the activation held there whose time away from
the device would be longest is offloaded (among those whose two copies fit around that
instant), and the schedule is timed again; a choice whose copies the channel cannot carry
is dropped. Like recomputing to fit, a heuristic: no fewest, no best."""

from __future__ import annotations

from zbsolve.baselines.offload import Key, stays, with_copies
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.op_kinds import Op
from zbsolve.schedule.schedule import Schedule, TimedOp


def _first_over(graph: OpGraph, ops: tuple[TimedOp, ...], limit: int) -> float | None:
    """The first instant the device's level passes `limit` (releases at an instant first)."""
    events = []
    for t in ops:
        allocated, released = graph.memory_effect(t.op)
        events.append((t.start, 1, allocated))
        events.append((t.end, 0, -released))
    level = 0
    for at, _, change in sorted(events):
        level += change
        if level > limit:
            return at
    return None


def fitted_with_offload(graph: OpGraph, schedule: Schedule) -> Schedule | None:
    """`schedule` (no copies, no overlapped pairs) with the offloads its devices need to fit
    the problem's limit; None where none is needed or it cannot be made to fit."""
    limits = graph.memory_limit
    if limits is None or not schedule.over_memory_limit() or any(t.op.kind not in ("F", "B", "BW", "W")
                                                                 for ops in schedule.devices for t in ops):
        return None
    plain, fitted = schedule, schedule
    chosen: set[Key] = set()
    dropped: set[Key] = set()
    while True:
        over = fitted.over_memory_limit()
        if not over:
            return fitted
        grew = False
        for d in over:
            key = _relief(graph, plain.devices[d], _first_over(graph, fitted.devices[d], limits[d]),
                          chosen | dropped)
            if key is not None:
                chosen.add(key)
                grew = True
        if not grew:
            return None
        fitted = with_copies(graph, plain, chosen, f"{schedule.name} offloaded to fit")
        sent = {(t.op.pipe, t.op.stage, t.op.microbatch) for ops in fitted.devices for t in ops if t.op.kind == "O"}
        dropped |= chosen - sent
        chosen &= sent


def _relief(graph: OpGraph, ops: tuple[TimedOp, ...], at: float | None, excluded: set[Key]) -> Key | None:
    """The activation to offload at instant `at`: held there, its copies fitting on either
    side, the longest time away; without such, the longest window not yet tried."""
    if at is None:
        return None
    forward, backward = stays(ops)
    windows = {}
    for key, f in forward.items():
        if key in excluded or key not in backward:
            continue
        copy = graph.time(graph.duration(Op("O", *key)))
        away = backward[key].start - f.end - 2 * copy
        if away > 0:
            windows[key] = (f.end + copy <= at <= backward[key].start - copy, away)
    return max(windows, key=lambda key: windows[key], default=None)
