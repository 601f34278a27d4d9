"""As-soon-as-possible timing of per-device op orders (docs/design.md, "Semantics") and their metrics ("Metrics").

Every baseline and every solver result goes through `simulate`, so all reported numbers
come from one place and are exact on the problem's integer grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zbsolve.errors import ScheduleError
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.op_kinds import RESOURCES, TABLE, is_copy, kinds_allowed, producer, ways
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
    """Start every slot as early as its device and its dependencies allow (in ticks). A
    device's copies (the offload lever) run on its copy channels in their order there, each
    no earlier than the start of the compute op listed before it (where the runtime issues
    it); the result lists each device's slots by start, compute first at one start."""

    def length(slot: Slot) -> int:
        if len(slot) == 1:
            return graph.duration(slot[0])
        if graph.fb_overlap is None:
            raise ScheduleError(f"{slot[0]} and {slot[1]} overlap, but the problem has no fb_overlap")
        return graph.fb_overlap

    lanes, issued_after = _lanes(orders)
    if issued_after:
        def requires(op: Op) -> list:
            found = graph.requirements(op)
            after = issued_after.get(op)  # its end, less its length: its start
            return found if after is None else [*found, (("end", after[0]), -length(after))]

        def produces(op: Op) -> tuple:
            return graph.produces(op) if is_copy(op.kind) else (*graph.produces(op), ("end", op))
    else:
        requires, produces = graph.requirements, graph.produces  # type: ignore[assignment]
    try:
        timed = earliest_times(lanes, requires, produces, length, release)
    except DeadlockError as stuck:
        raise ScheduleError(_deadlock_message(graph, lanes, stuck.position, stuck.done)) from None
    if len(lanes) == len(orders):
        return timed
    per_lane = len(RESOURCES)
    return [sorted((slot for r in range(per_lane) for slot in timed[d * per_lane + r]),
                   key=lambda slot: (slot[1], is_copy(slot[0][0].kind)))
            for d in range(len(orders))]


def _lanes(orders: Sequence[Sequence[Slot]]) -> tuple[list[list[Slot]], dict[Op, Slot]]:
    """Each device's order split by resource (compute, then each copy channel), and for each
    copy the compute op listed before it; without copies, the orders as they are."""
    if not any(is_copy(slot[0].kind) for order in orders for slot in order):
        return [list(order) for order in orders], {}
    lanes: list[list[Slot]] = []
    issued_after: dict[Op, Slot] = {}
    for order in orders:
        mine: dict[str, list[Slot]] = {r: [] for r in RESOURCES}
        last: Slot | None = None
        for slot in order:
            resource = TABLE[slot[0].kind].resource
            mine[resource].append(slot)
            if resource == "compute":
                last = slot
            elif last is not None:
                issued_after[slot[0]] = last
        lanes.extend(mine[r] for r in RESOURCES)
    return lanes, issued_after


def _deadlock_message(graph: OpGraph, orders, position, done) -> str:
    for d, order in enumerate(orders):
        if position[d] < len(order):
            for op in order[position[d]]:
                for event, _ in graph.requirements(op):
                    if event not in done:
                        kind, q, k, i = event
                        need = {"F": "forward", "I": "input gradient", "A": "activation back on the device",
                                "H": "activation's copy to host"}[kind]
                        device = d // (len(orders) // graph.problem.devices)  # orders: a device's lanes
                        return (
                            f"the order cannot run: device {device} is stuck at {op.describe()}, "
                            f"which waits for the {need} of pipe {q} stage {k} microbatch {i} "
                            "that never comes before it"
                        )
    return "the order cannot run"  # unreachable: some device always has a blocked head


def compute_metrics(graph: OpGraph, timed: Sequence[Sequence[TickSlot]]) -> Metrics:
    """docs/design.md, "Metrics" metrics, from exact ticks."""
    problem = graph.problem
    devices = problem.devices
    makespan = max((end for slots in timed for _, _, end in slots), default=0)
    # busy: the compute stream's time (copies run beside it); a device's span is its compute's
    computing = [[slot for slot in slots if not is_copy(slot[0][0].kind)] for slots in timed]
    busy = [sum(end - start for _, start, end in slots) for slots in computing]
    spans = [slots[-1][2] - slots[0][1] if slots else 0 for slots in computing]
    span = max(spans)
    peaks = [peak_memory(graph, slots) for slots in timed]
    unit = problem.one_f_one_b_peak()
    levels = tuple(graph.memory(p) for p in peaks)
    return Metrics(
        makespan=graph.time(makespan),
        bubble_rate=1 - sum(busy) / (devices * makespan) if makespan else 0.0,
        span=graph.time(span),
        span_bubble_rate=1 - max(busy) / span if span else 0.0,
        busy=tuple(graph.time(b) for b in busy),
        peak_memory=levels,
        peak_memory_x=max(levels) / unit if unit else 0.0,
    )


def peak_memory(graph: OpGraph, slots: Sequence[TickSlot]) -> int:
    """A device's highest level: each op allocates at its start and releases at its end. At
    one instant, what ops of positive length release comes first; then the ops starting
    there in their order, an op of no length releasing right after it allocates (so that
    one stream's ops count as run in sequence)."""
    events: list[tuple[int, int, int, int]] = []  # (tick, phase, position, change)
    for j, (slot, start, end) in enumerate(slots):
        for op in slot:
            alloc, release = graph.memory_effect(op)
            events.append((start, 1, 2 * j, alloc))
            events.append((end, 0, 0, -release) if end > start else (end, 1, 2 * j + 1, -release))
    level = peak = 0
    for _, _, _, delta in sorted(events):
        level += delta
        peak = max(peak, level)
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
