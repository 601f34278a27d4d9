"""Hand-made schedules for one chain of P stages, one per device (`single` placement).

Each function returns per-device op orders; the simulator times them.
"""

from __future__ import annotations

from collections import deque

from zbsolve.problem.op_graph import Op
from zbsolve.problem.problem import Problem


def _chain(problem: Problem) -> tuple[int, list[int]]:
    return problem.devices, list(problem.pipes[0].microbatches)


def gpipe(problem: Problem) -> list[list[Op]]:
    """All forwards, then all fused backwards, each in microbatch order."""
    P, mbs = _chain(problem)
    return [[Op("F", 0, r, i) for i in mbs] + [Op("BW", 0, r, i) for i in mbs] for r in range(P)]


def one_f_one_b(problem: Problem) -> list[list[Op]]:
    """1F1B: min(P-r-1, M) warm-up forwards, then F/BW alternating, then the drain."""
    P, mbs = _chain(problem)
    M = len(mbs)
    orders = []
    for r in range(P):
        warmup = min(P - r - 1, M)
        order = [Op("F", 0, r, mbs[i]) for i in range(warmup)]
        for i in range(M - warmup):
            order += [Op("F", 0, r, mbs[warmup + i]), Op("BW", 0, r, mbs[i])]
        order += [Op("BW", 0, r, mbs[i]) for i in range(M - warmup, M)]
        orders.append(order)
    return orders


def _zero_bubble(problem: Problem, warmup_of, held_back_of) -> list[list[Op]]:
    """Shared shape of ZB-H1/H2: warm-up forwards, then per microbatch i the next F (if
    any), B_i and, once i reaches the hold-back, the oldest pending W; the rest at the end."""
    P, mbs = _chain(problem)
    M = len(mbs)
    orders = []
    for r in range(P):
        warmup = min(warmup_of(r), M)
        held_back = held_back_of(r)
        order = [Op("F", 0, r, mbs[i]) for i in range(warmup)]
        next_forward = warmup
        pending: deque[int] = deque()
        for i in range(M):
            if next_forward < M:
                order.append(Op("F", 0, r, mbs[next_forward]))
                next_forward += 1
            order.append(Op("B", 0, r, mbs[i]))
            pending.append(mbs[i])
            if i >= held_back:
                order.append(Op("W", 0, r, pending.popleft()))
        order += [Op("W", 0, r, i) for i in pending]
        orders.append(order)
    return orders


def zb_h1(problem: Problem) -> list[list[Op]]:
    """ZB-H1 (Qi et al. 2024): 1F1B's memory, W's of rank r deferred by r microbatches."""
    P = problem.devices
    return _zero_bubble(problem, lambda r: P - r - 1, lambda r: r)


def zb_h2(problem: Problem) -> list[list[Op]]:
    """ZB-H2: 2(P-r-1) warm-up forwards and W's held back by 2r microbatches."""
    P = problem.devices
    return _zero_bubble(problem, lambda r: 2 * (P - r - 1), lambda r: 2 * r)
