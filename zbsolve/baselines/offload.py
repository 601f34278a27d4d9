"""Hand-made schedules with activations offloaded by the PipeOffload rule (the offload lever,
docs/design.md, "Memory levers"; the rule as docs/solving.md, "The PipeOffload rule" cites it):
the order stays the hand-made one; each device offloads the microbatches of its first chunks
(as few chunks as fit the memory limit; all of them without one), copies each activation to
host right after its forward in forward order, and copies it back as late as its backward
and the next copy back allow. A microbatch whose copies do not fit between its forward and
its backward keeps its activation."""

from __future__ import annotations

from collections.abc import Callable

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.op_kinds import Kind, Op
from zbsolve.problem.placements import chunks_on_devices
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule, TimedOp
from zbsolve.schedule.simulator import simulate

Key = tuple[int, int, int]  # (pipe, stage, microbatch)


def stays(ops: tuple[TimedOp, ...]) -> tuple[dict[Key, TimedOp], dict[Key, TimedOp]]:
    """One device's forwards and backwards (kept activations' ends of a stay), by key."""
    forward = {_key(t.op): t for t in ops if t.op.kind == "F"}
    backward = {_key(t.op): t for t in ops if t.op.kind in ("B", "BW")}
    return forward, backward


def _copies(graph: OpGraph, ops: tuple[TimedOp, ...], chosen: set[Key]) -> dict[Op, float]:
    """One device's copies by the rule: their starts, keyed by O and L ops."""
    forward, backward = stays(ops)
    chosen = chosen & forward.keys()  # this device's
    length = {key: graph.time(graph.duration(Op("O", *key))) for key in chosen}
    sent: dict[Key, float] = {}
    free = 0.0
    for key in sorted(chosen, key=lambda key: forward[key].end):  # to host in forward order
        start = max(forward[key].end, free)
        if start + 2 * length[key] <= backward[key].start:  # both copies fit before the backward
            sent[key] = start
            free = start + length[key]
    starts: dict[Op, float] = {}
    latest = float("inf")
    for key in sorted(sent, key=lambda key: backward[key].start, reverse=True):  # back, latest first
        begin = min(backward[key].start, latest) - length[key]
        if begin >= sent[key] + length[key]:
            starts[Op("O", *key)], starts[Op("L", *key)] = sent[key], begin
            latest = begin
    return starts


def with_copies(graph: OpGraph, plain: Schedule, chosen: set[Key], name: str) -> Schedule:
    """`plain` (no copies) with the `chosen` microbatch-stages' copies placed by the rule,
    timed; a choice whose copies do not fit its window keeps its activation."""
    orders, release = [], {}
    for ops in plain.devices:
        copies = _copies(graph, ops, chosen)
        release.update({op: graph.ticks(start) for op, start in copies.items()})
        timed = [(t.start, 0, t.op.with_kind(Kind.FO.value) if t.op.kind == "F" and Op("O", *_key(t.op)) in copies
                  else t.op) for t in ops]
        timed += [(start, 1, op) for op, start in copies.items()]
        orders.append([op for _, _, op in sorted(timed, key=lambda item: (item[0], item[1]))])
    return simulate(graph, orders, name, release=release)


def _key(op: Op) -> Key:
    return op.pipe, op.stage, op.microbatch


def pipeoffload(orders: list, problem: Problem, name: str, graph: OpGraph | None = None) -> Schedule:
    """The hand-made `orders` with the PipeOffload rule's copies."""
    graph = graph or OpGraph(problem)
    plain = simulate(graph, orders, name)
    chunks = chunks_on_devices(problem)
    schedule = plain
    for first in range(1, max(chunks.values()) + 2):
        chosen = {(q, k, i) for (q, k), c in chunks.items() if c < first for i in problem.pipes[q].microbatches}
        schedule = with_copies(graph, plain, chosen, name)
        if not schedule.over_memory_limit():
            break
    return schedule


def offloading(build: Callable[[Problem], list], name: str) -> Callable[[Problem], Schedule]:
    """A baseline's builder with the PipeOffload rule's copies: it gives the timed schedule."""
    return lambda problem: pipeoffload(build(problem), problem, name)


def needs_offload(problem: Problem) -> str | None:
    return None if "offload" in problem.levers else "needs the offload lever (--levers offload)"
