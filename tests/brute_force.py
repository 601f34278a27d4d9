"""Best makespan of tiny problems by exhaustive search, independent of every solver."""

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
