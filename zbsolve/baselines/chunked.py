"""Hand-made schedules with several stages per rank: interleaved 1F1B (Megatron) and ZB-V."""

from __future__ import annotations

from zbsolve.problem.op_graph import Op
from zbsolve.problem.problem import Problem


def interleaved_1f1b(problem: Problem) -> list[list[Op]]:
    """Megatron's interleaved 1F1B with fused backward.

    Virtual microbatch k of rank r runs chunk (k // P) % V of microbatch
    (k // (P V)) P + k % P (forwards; backwards take chunks in reverse); warm-up is
    2(P - r - 1) + (V - 1) P forwards, then one forward and one backward alternate.
    """
    P = problem.devices
    stages = len(problem.pipes[0].stages)
    V = stages // P
    mbs = list(problem.pipes[0].microbatches)
    total = V * len(mbs)

    def virtual(kind: str, rank: int, k: int) -> Op:
        chunk = (k // P) % V
        if kind == "BW":
            chunk = V - 1 - chunk
        return Op(kind, 0, chunk * P + rank, mbs[(k // (P * V)) * P + k % P])

    orders = []
    for r in range(P):
        warmup = min(2 * (P - r - 1) + (V - 1) * P, total)
        order = [virtual("F", r, k) for k in range(warmup)]
        for k in range(total - warmup):
            order += [virtual("F", r, warmup + k), virtual("BW", r, k)]
        order += [virtual("BW", r, k) for k in range(total - warmup, total)]
        orders.append(order)
    return orders


def _counted(order: list, nxt: dict):
    """Append the next microbatch of (kind, chunk) to `order`, counting per kind and chunk."""

    def run(kind: str, chunk: int) -> None:
        order.append((kind, chunk, nxt.get((kind, chunk), 0)))
        nxt[(kind, chunk)] = nxt.get((kind, chunk), 0) + 1

    return run


def zb_v(problem: Problem) -> list[list[Op]]:
    """ZB-V (Qi et al. 2024, handcrafted) on the vshape placement, as published.

    The pattern is built for n = max(2P - 1, M) microbatches; ids beyond M are dropped.
    """
    P = problem.devices
    mbs = list(problem.pipes[0].microbatches)
    n = max(2 * P - 1, len(mbs))
    orders = []
    for r in range(P):
        stage = (r, 2 * P - 1 - r)  # chunk 0 and chunk 1 of rank r
        order: list[tuple[str, int, int]] = []
        nxt: dict[tuple[str, int], int] = {}
        run = _counted(order, nxt)

        for _ in range(2 * (P - r) - 1):
            run("F", 0)
        for _ in range(r):
            run("F", 1)
            run("F", 0)
        for _ in range(P - r):
            run("F", 1)
            run("B", 1)
            run("W", 1)
        while nxt.get(("F", 1), 0) < n:
            if nxt.get(("F", 0), 0) < n:
                run("F", 0)
            run("B", 0)
            run("W", 0)
            run("F", 1)
            run("B", 1)
            run("W", 1)
        for _ in range(r):
            run("B", 0)
            run("B", 1)
        for _ in range(P - r):
            run("B", 0)
            run("W", 0)
        while nxt.get(("W", 1), 0) < n:
            run("W", 1)
        while nxt.get(("W", 0), 0) < n:
            run("W", 0)
        orders.append([Op(kind, 0, stage[c], mbs[i]) for kind, c, i in order if i < len(mbs)])
    return orders


def looped_bfs(problem: Problem) -> list[list[Op]]:
    """Breadth-first pipeline parallelism (Lamy-Poirier 2023, torch's ScheduleLoopedBFS) with
    fused backward: each rank runs every microbatch through its first chunk, then its next,
    and the backwards chunk by chunk from the last, latest microbatch first."""
    P = problem.devices
    V = len(problem.pipes[0].stages) // P
    mbs = list(problem.pipes[0].microbatches)
    orders = []
    for r in range(P):
        chunks = [c * P + r for c in range(V)]
        order = [Op("F", 0, stage, i) for stage in chunks for i in mbs]
        order += [Op("BW", 0, stage, i) for stage in reversed(chunks) for i in reversed(mbs)]
        orders.append(order)
    return orders


def interleaved_zb(problem: Problem) -> list[list[Op]]:
    """The interleaved zero-bubble order that torch (ScheduleInterleavedZeroBubble) and
    Megatron ship: interleaved 1F1B with split backward (ZB-1P, Qi et al. 2024).

    Microbatches go in rounds of R = M / max(1, M // P). Rank r warms up with (V - 1) R +
    P - 1 - r forwards; then each step runs a forward and an input gradient (B), chunks
    advancing every R steps (forwards from the first chunk, backwards from the last), and,
    after the first r steps, the weight gradient (W) of the oldest B still without one; the
    cool-down runs the remaining B's, each followed by an outstanding W, then the rest."""
    P = problem.devices
    V = len(problem.pipes[0].stages) // P
    mbs = list(problem.pipes[0].microbatches)
    per_round = len(mbs) // max(1, len(mbs) // P)
    return [_interleaved_zb_rank(r, P, V, mbs, per_round) for r in range(P)]


def _interleaved_zb_rank(r: int, P: int, V: int, mbs: list[int], per_round: int) -> list[Op]:
    total = V * len(mbs)
    warmup = min((V - 1) * per_round + P - 1 - r, total)
    counter: dict[tuple[str, int], int] = {}
    order: list[Op] = []
    backwards: list[int] = []  # the stage of each B run, for its W in the same order

    def run(kind: str, stage: int) -> None:
        i = counter.get((kind, stage), 0)
        counter[(kind, stage)] = i + 1
        order.append(Op(kind, 0, stage, mbs[i]))

    weights = 0
    for step in range(total + warmup):
        if step < total:  # forwards advance a chunk every round, from the first
            run("F", (step // per_round) % V * P + r)
        if step < warmup:
            continue
        stage = (V - 1 - (step - warmup) // per_round % V) * P + r  # backwards from the last chunk
        run("B", stage)
        backwards.append(stage)
        if step - warmup >= r:
            run("W", backwards[weights])
            weights += 1
    for stage in backwards[weights:]:
        run("W", stage)
    return order
