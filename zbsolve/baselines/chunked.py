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
