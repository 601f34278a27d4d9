"""Best makespan of tiny problems by exhaustive search, independent of every solver."""

import math

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.schedule.simulator import simulate


def brute_force_makespan(problem):
    """Best makespan over every schedule a device may run, pairs included (tiny problems).

    Depth-first over semi-active schedules: each step places one slot (a single op, or an
    F with a B or whole backward of another stage) as early as its inputs and its device
    allow, in nondecreasing (start, device) order so each combination of per-device orders
    is met once. Times come from the costs here; the simulator re-times every complete
    candidate and the memory limit is checked on its result.
    """
    graph = OpGraph(problem)
    split, pair_length = problem.split_backward, graph.fb_overlap
    ops = graph.ops()
    producer = {"F": "F", "I": "B" if split else "BW"}
    best = [None]

    def ready(op, done):
        times = [0]
        for (event, q, k, i), delay in graph.requirements(op):
            source = Op(producer[event], q, k, i)
            if source not in done:
                return None
            times.append(done[source] + delay)
        return max(times)

    def slots(done):
        free = [op for op in ops if op not in done and ready(op, done) is not None]
        yield from ((op,) for op in free)
        for f in (op for op in free if op.kind == "F" and pair_length is not None):
            for b in (op for op in free if op.kind in ("B", "BW") and graph.device(op) == graph.device(f)):
                if (f.pipe, f.stage) != (b.pipe, b.stage):
                    yield (f, b)
                    if b.kind == "B":
                        yield (f, Op("BW", b.pipe, b.stage, b.microbatch))

    def search(done, free_at, last, orders):
        if len(done) == len(ops):
            _keep(graph, orders, best)
            return
        for slot in slots(done):
            d = graph.device(slot[0])
            halves = [Op("B", op.pipe, op.stage, op.microbatch) if op.kind == "BW" and split else op for op in slot]
            start = max([free_at[d]] + [ready(op, done) for op in halves])
            if (start, d) <= last:
                continue
            end = start + (pair_length if len(slot) == 2 else sum(graph.duration(op) for op in slot))
            if best[0] is not None and graph.time(end) >= best[0]:
                continue
            placed = dict(done)
            for op in slot:
                for part in (("B", "W") if op.kind == "BW" and split else (op.kind,)):
                    placed[Op(part, op.pipe, op.stage, op.microbatch)] = end
            moved = list(free_at)
            moved[d] = end
            search(placed, moved, (start, d), [o + [slot] if j == d else o for j, o in enumerate(orders)])

    search({}, [0] * problem.devices, (-1, -1), [[] for _ in range(problem.devices)])
    return best[0]


def _keep(graph, orders, best):
    s = simulate(graph, orders)
    if not s.over_memory_limit() and (best[0] is None or s.metrics.makespan < best[0]):
        best[0] = s.metrics.makespan


def brute_force_levers_makespan(problem):
    """Best makespan with the recompute lever, by exhaustive search (tiny problems, no pairs):
    every choice of which microbatches recompute at which stage, and for each, every
    per-device order, depth-first as above. The ops of a choice are an F, or an FC and its R,
    then B and W (or BW); each waits for the results the op graph names, produced by
    whichever present op the op-kind table says produces them."""
    from itertools import product

    from zbsolve.problem.op_kinds import TABLE

    graph = OpGraph(problem)
    plain = graph.ops()
    forwards = [op for op in plain if op.kind == "F"]
    best = [None]
    for choice in product((False, True), repeat=len(forwards)):
        recomputed = {f for f, chosen in zip(forwards, choice) if chosen}
        ops = []
        for op in plain:
            if op in recomputed:
                ops += [op.with_kind("FC"), op.with_kind("R")]
            else:
                ops.append(op)
        producer = {(event, op.pipe, op.stage, op.microbatch): op for op in ops for event in TABLE[op.kind].produces}

        def ready(op, done, producer=producer):
            times = [0]
            for key, delay in graph.requirements(op):
                source = producer[key]
                if source not in done:
                    return None
                times.append(done[source] + delay)
            return max(times)

        def search(done, free_at, last, orders, ops=ops, ready=ready):
            if len(done) == len(ops):
                _keep(graph, orders, best)
                return
            for op in ops:
                if op in done:
                    continue
                at = ready(op, done)
                if at is None:
                    continue
                d = graph.device(op)
                start = max(free_at[d], at)
                if (start, d) <= last:
                    continue
                end = start + graph.duration(op)
                if best[0] is not None and graph.time(end) >= best[0]:
                    continue
                moved = list(free_at)
                moved[d] = end
                search({**done, op: end}, moved, (start, d), [o + [op] if j == d else o for j, o in enumerate(orders)])

        search({}, [0] * problem.devices, (-1, -1), [[] for _ in range(problem.devices)])
    return best[0]


def brute_force_timed_makespan(problem):
    """Best makespan with any memory levers, by exhaustive search over integer start times
    (tiny problems, no pairs, split backward, comm 0). Each step (the costs' greatest common
    divisor in ticks), each free
    lane of a device (its compute stream and, with the offload lever, its two copy channels)
    starts one of its ready ops or nothing; a forward's start chooses its way (kept,
    recomputed or offloaded); the level a device holds after the tick's starts is held to its
    limit. Some optimal schedule starts every op on a whole step (fix the interleaving of its
    events and the starts solve difference constraints whose constants are whole steps), so
    this is the exact optimum. Written apart from the simulator and the
    solvers: it reads only the op-kind table and the op graph's costs, dependencies and
    memory amounts. A state met again no earlier than before is not searched again (nothing
    in the problem depends on the clock), nor one whose devices' remaining compute ends
    no earlier than the best found."""
    from itertools import product

    from zbsolve.problem.op_kinds import TABLE, ways

    graph = OpGraph(problem)
    assert problem.split_backward and graph.comm == 0 and problem.fb_overlap is None, "split, comm 0, no pairs"
    options = [way for way in ways(True, problem.levers) if "BW" not in way]
    keys = [(q, k, i) for q, pipe in enumerate(problem.pipes) for k in range(len(pipe.stages))
            for i in pipe.microbatches]
    device = {key: graph.device(Op("F", *key)) for key in keys}
    limit = graph.memory_limit
    lanes = [(d, r) for d in range(problem.devices) for r in ("compute", "d2h", "h2d")]
    least = {key: min(sum(graph.duration(Op(kind, *key)) for kind in way if TABLE[kind].resource == "compute")
                      for way in options) for key in keys}
    best = [None]
    earliest: dict = {}
    step = math.gcd(*(graph.duration(Op(kind, *key)) for key in keys for way in options for kind in way))

    def producer(event, way_of, q, k, i):
        way = way_of.get((q, k, i))
        return None if way is None else next(Op(kind, q, k, i) for kind in way if event in TABLE[kind].produces)

    def ready(op, way_of, ended):
        return all((source := producer(event, way_of, q, k, i)) is not None and source in ended
                   for (event, q, k, i), _ in graph.requirements(op))

    def candidates(lane, way_of, ended, started):
        d, resource = lane
        found = []
        for key in keys:
            if device[key] != d:
                continue
            for way in ([way_of[key]] if key in way_of else options):
                for kind in way:
                    op = Op(kind, *key)
                    if op not in started and TABLE[kind].resource == resource and \
                            ready(op, {**way_of, key: way}, ended):
                        found.append((op, way))
        return found

    def level(d, started, t):
        return sum(alloc - (release if end <= t else 0)
                   for op, (_, end) in started.items() if device[op.pipe, op.stage, op.microbatch] == d
                   for alloc, release in (graph.memory_effect(op),))

    def bound(t, way_of, started):
        """When each device's compute can end at the earliest: its running op, then the rest of its work."""
        ends = []
        for d in range(problem.devices):
            running = max([t] + [end for op, (_, end) in started.items()
                                 if graph.device(op) == d and TABLE[op.kind].resource == "compute"])
            left = sum(least[key] if key not in way_of else sum(
                graph.duration(Op(kind, *key)) for kind in way_of[key]
                if TABLE[kind].resource == "compute" and Op(kind, *key) not in started)
                for key in keys if device[key] == d)
            ends.append(running + left)
        return max(ends)

    def search(t, way_of, started):
        ended = {op for op, (_, end) in started.items() if end <= t}
        if len(way_of) == len(keys) and len(ended) == sum(len(way) for way in way_of.values()):
            finish = max(end for _, end in started.values())
            best[0] = finish if best[0] is None else min(best[0], finish)
            return
        if best[0] is not None and bound(t, way_of, started) >= best[0]:
            return
        state = (frozenset(way_of.items()), frozenset(ended),
                 frozenset((op, end - t) for op, (_, end) in started.items() if end > t))
        if earliest.get(state, t + 1) <= t:
            return
        earliest[state] = t
        busy = {(graph.device(op), TABLE[op.kind].resource) for op, (_, end) in started.items() if end > t}
        choices = [[None] + candidates(lane, way_of, ended, started) for lane in lanes if lane not in busy]
        for pick in product(*choices):
            chosen = [c for c in pick if c is not None]
            now, ways_now = dict(started), dict(way_of)
            clash = False
            for op, way in chosen:
                key = (op.pipe, op.stage, op.microbatch)
                clash |= ways_now.setdefault(key, way) != way  # two lanes choosing one forward's way
                now[op] = (t, t + graph.duration(op))
            if clash or (limit is not None and any(level(d, now, t) > limit[d] for d in range(problem.devices))):
                continue
            search(t + step, ways_now, now)

    search(0, {}, {})
    return graph.time(best[0])
