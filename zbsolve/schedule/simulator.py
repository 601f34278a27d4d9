"""As-soon-as-possible timing of per-device op orders (docs/design.md, "Semantics") and their metrics ("Metrics").

Every baseline and every solver result goes through `simulate`, so all reported numbers
come from one place and are exact on the problem's integer grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zbsolve.errors import ScheduleError
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.op_kinds import kinds_allowed, producer, ways
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Metrics, Schedule, Slot, SolverInfo, TimedOp
from zbsolve.schedule.timing import DeadlockError, earliest_times

# A timed slot on the grid: (ops, start tick, end tick).
TickSlot = tuple[Slot, int, int]


def check_orders(graph: OpGraph, orders: Sequence[Sequence[Slot]]) -> None:
    """Raise ScheduleError unless the orders hold every op of the problem exactly once."""
    problem = graph.problem
    if len(orders) != problem.devices:
        raise ScheduleError(f"need an order for each of {problem.devices} devices, got {len(orders)}")
    allowed = set(kinds_allowed(problem.split_backward, problem.levers))
    seen: set[Op] = set()
    for d, order in enumerate(orders):
        for slot in order:
            if len(slot) == 2:
                _check_pair(graph, slot, d)
            elif len(slot) != 1:
                raise ScheduleError(f"device {d}: a slot holds {len(slot)} ops (1, or an F&B pair)")
            for op in slot:
                if op.kind not in allowed:
                    raise ScheduleError(
                        f"device {d}: {op.describe()} uses kind {op.kind}, but this problem "
                        f"allows {', '.join(sorted(allowed))}"
                    )
                if not (0 <= op.pipe < len(problem.pipes)) or not (
                    0 <= op.stage < len(problem.pipes[op.pipe].stages)
                ) or op.microbatch not in problem.pipes[op.pipe].microbatch_set:
                    raise ScheduleError(f"device {d}: {op.describe()} is not part of the problem")
                if graph.device(op) != d:
                    raise ScheduleError(
                        f"{op.describe()} is listed on device {d} but its stage lives on "
                        f"device {graph.device(op)}"
                    )
                if op in seen:
                    raise ScheduleError(f"{op.describe()} appears twice (device {d})")
                seen.add(op)
    _check_complete(graph, seen)


def _check_pair(graph: OpGraph, slot: Slot, device: int) -> None:
    kinds = sorted(op.kind for op in slot)
    if graph.fb_overlap is None:
        raise ScheduleError(f"device {device}: overlapped pair {slot[0]}+{slot[1]} needs fb_overlap")
    # a forward and a backward that produces the input gradient (B, or BW)
    halves = [sorted((producer("F", split), producer("I", split))) for split in (True, False)]
    if kinds not in halves:
        raise ScheduleError(f"device {device}: an overlapped pair is one F and one B or BW, got {kinds}")
    if (slot[0].pipe, slot[0].stage) == (slot[1].pipe, slot[1].stage):
        raise ScheduleError(f"device {device}: overlapped pair {slot[0]}+{slot[1]} is one stage")


def _check_complete(graph: OpGraph, seen: set[Op]) -> None:
    """Each microbatch runs through each stage one of the table's ways (F, BW or F, B, W; with
    the recompute lever also FC, R, BW or FC, R, B, W)."""
    split, levers = graph.problem.split_backward, graph.problem.levers
    options = [set(way) for way in ways(split, levers)]
    allowed = kinds_allowed(split, levers)
    for q, pipe in enumerate(graph.problem.pipes):
        for k in range(len(pipe.stages)):
            for i in pipe.microbatches:
                here = {kind for kind in allowed if Op(kind, q, k, i) in seen}
                if here in options:
                    continue
                holding = [way for way in options if here <= way]
                if not holding:  # parts of two ways: name what the fullest one leaves over
                    way = max(options, key=lambda w: len(here & w))
                    extra = next(kind for kind in allowed if kind in here - way)
                    forwards = {w[0] for w in ways(split, levers)}  # every way has one
                    others = " and ".join(kind for kind in allowed if kind in (here & way) - forwards)
                    one_way = " or ".join(", ".join(w) for w in ways(split, levers))
                    raise ScheduleError(f"{Op(extra, q, k, i).describe()} also has {others}: a microbatch runs "
                                        f"through a stage one way ({one_way})")
                way = max(holding, key=lambda w: len(here & w))  # the first of equals: the fused way
                missing = next(kind for kind in allowed if kind in way - here)
                raise ScheduleError(f"{Op(missing, q, k, i).describe()} is missing")


def time_orders(
    graph: OpGraph,
    orders: Sequence[Sequence[Slot]],
    release: Mapping[Op, int] | None = None,
) -> list[list[TickSlot]]:
    """Start every slot as early as its device and its dependencies allow (in ticks)."""

    def length(slot: Slot) -> int:
        if len(slot) == 1:
            return graph.duration(slot[0])
        if graph.fb_overlap is None:
            raise ScheduleError(f"{slot[0]} and {slot[1]} overlap, but the problem has no fb_overlap")
        return graph.fb_overlap

    try:
        return earliest_times(orders, graph.requirements, graph.produces, length, release)
    except DeadlockError as stuck:
        raise ScheduleError(_deadlock_message(graph, orders, stuck.position, stuck.done)) from None


def _deadlock_message(graph: OpGraph, orders, position, done) -> str:
    for d, order in enumerate(orders):
        if position[d] < len(order):
            for op in order[position[d]]:
                for event, _ in graph.requirements(op):
                    if event not in done:
                        kind, q, k, i = event
                        need = {"F": "forward", "I": "input gradient", "A": "recomputed activation"}[kind]
                        return (
                            f"the order cannot run: device {d} is stuck at {op.describe()}, "
                            f"which waits for the {need} of pipe {q} stage {k} microbatch {i} "
                            "that never comes before it"
                        )
    return "the order cannot run"  # unreachable: some device always has a blocked head


def compute_metrics(graph: OpGraph, timed: Sequence[Sequence[TickSlot]]) -> Metrics:
    """docs/design.md, "Metrics" metrics, from exact ticks."""
    problem = graph.problem
    devices = problem.devices
    makespan = max((slots[-1][2] for slots in timed if slots), default=0)
    busy = [sum(end - start for _, start, end in slots) for slots in timed]
    spans = [slots[-1][2] - slots[0][1] if slots else 0 for slots in timed]
    span = max(spans)
    peaks = [_peak_memory(graph, slots) for slots in timed]
    unit = problem.one_f_one_b_peak()
    peak_memory = tuple(graph.memory(p) for p in peaks)
    return Metrics(
        makespan=graph.time(makespan),
        bubble_rate=1 - sum(busy) / (devices * makespan) if makespan else 0.0,
        span=graph.time(span),
        span_bubble_rate=1 - max(busy) / span if span else 0.0,
        busy=tuple(graph.time(b) for b in busy),
        peak_memory=peak_memory,
        peak_memory_x=max(peak_memory) / unit if unit else 0.0,
    )


def _peak_memory(graph: OpGraph, slots: Sequence[TickSlot]) -> int:
    """Ops of a device run in sequence: allocate at each start, release at each end."""
    level = peak = 0
    for slot, _, _ in slots:
        effects = [graph.memory_effect(op) for op in slot]
        level += sum(alloc for alloc, _ in effects)
        peak = max(peak, level)
        level -= sum(release for _, release in effects)
    return peak


def to_schedule(
    graph: OpGraph, timed: Sequence[Sequence[TickSlot]], name: str, solver: SolverInfo | None = None
) -> Schedule:
    devices = []
    pair = 0
    for slots in timed:
        ops: list[TimedOp] = []
        for slot, start, end in slots:
            overlap = None
            if len(slot) == 2:
                overlap, pair = pair, pair + 1
            ops.extend(TimedOp(op, graph.time(start), graph.time(end), overlap) for op in slot)
        devices.append(tuple(ops))
    return Schedule(
        name=name,
        problem=graph.problem,
        devices=tuple(devices),
        metrics=compute_metrics(graph, timed),
        solver=solver or SolverInfo("baseline"),
    )


def simulate(
    problem: Problem | OpGraph,
    orders: Sequence[Sequence[Slot | Op]],
    name: str = "custom",
    *,
    solver: SolverInfo | None = None,
    release: Mapping[Op, int] | None = None,
) -> Schedule:
    """Time per-device orders as soon as possible and return the schedule with its metrics.

    `orders[d]` lists device d's ops in execution order; an entry may be a bare Op or a
    tuple of ops (an overlapped F&B pair). `release` holds earliest start ticks per op.
    """
    graph = problem if isinstance(problem, OpGraph) else OpGraph(problem)
    slots = [[item if isinstance(item, tuple) and not isinstance(item, Op) else (item,) for item in order]
             for order in orders]
    check_orders(graph, slots)
    return to_schedule(graph, time_orders(graph, slots, release), name, solver)
