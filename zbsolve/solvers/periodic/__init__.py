"""Periodic schedules: one building block of offsets, repeated every T (the lockstep
idea of the controllable-memory V schedules, solved for the problem's own costs).

Where memory is tight a greedy start of whatever is ready stretches how long each
microbatch holds its activation; a periodic schedule fixes those lifetimes in advance.
The period is searched between the busiest device's work per microbatch (no idle at
all) and a period at which microbatches run one after another. It is a starting
schedule for the exact solvers; its status is `feasible`.
"""

from __future__ import annotations

import math
import time

from zbsolve.ops import Op
from zbsolve.solvers.base import BackendResult, SolveInput

from .model import block_ops, solve_block

PROBES = 12  # periods tried at most
SLOW_PROBES = 6  # a probe may take this share of the time limit (most are far quicker)
FIRST_STEP = 0.05  # the period grows by 5%, 10%, 20%, ... of the work until a block fits
CLOSE_ENOUGH = 1.02  # then refine until within 2% of a period known not to fit


def solve_periodic(data: SolveInput) -> BackendResult:
    t0 = time.monotonic()
    ops = block_ops(data)
    work: dict[int, int] = {}
    for op in ops:
        d = data.graph.device(op)
        work[d] = work.get(d, 0) + data.duration[op]
    low = max(max(work.values()), max(data.duration[op] for op in ops), 1)
    high = max(low, sum(data.duration[op] for op in ops) + sum(
        delay for op in ops for _, delay in data.predecessors[op]))
    per_probe = data.time_limit / SLOW_PROBES
    best: tuple[int, int, dict[Op, int]] | None = None  # (objective, period, starts)
    failed, works = low - 1, None  # largest period that failed (or timed out), smallest that worked
    period, step, spent = low, FIRST_STEP, 0.0
    for _ in range(PROBES):
        if data.stop.is_set() or spent >= data.time_limit:
            break
        offsets, used = solve_block(data, period, 2 * high, min(per_probe, data.time_limit - spent))
        spent += used
        if offsets is None:
            failed = period
        else:
            works = period if works is None else min(works, period)
            starts = _repeat(data, offsets, period)
            value = data.objective_of(starts)
            if best is None or value < best[0]:
                best = (value, period, starts)
        if works is None:  # gallop up: tight memory may need a period well above the work
            if period >= high:
                break
            period, step = min(high, max(period + 1, math.ceil(low * (1 + step)))), 2 * step
        elif works - failed <= 1 or works <= CLOSE_ENOUGH * failed:
            break
        else:  # halve the interval between a failing and a working period
            period = min(max(round(math.sqrt(failed * works)), failed + 1), works - 1)
    wall = time.monotonic() - t0
    if best is None:
        return BackendResult("unknown", None, None, None, wall, interrupted=data.stop.is_set(),
                             message="no periodic schedule found")
    value, period, starts = best
    return BackendResult("feasible", starts, value, None, wall, interrupted=data.stop.is_set(),
                         message=f"periodic schedule, one microbatch every {data.value(period):g}")


def _repeat(data: SolveInput, offsets: dict[Op, int], period: int) -> dict[Op, int]:
    """Microbatch position n of every pipe at n * period + its block offsets."""
    starts = {}
    for q, pipe in enumerate(data.graph.problem.pipes):
        block = [(op.kind, op.stage, offset) for op, offset in offsets.items() if op.pipe == q]
        for n, i in enumerate(pipe.microbatches):
            for kind, stage, offset in block:
                starts[Op(kind, q, stage, i)] = n * period + offset
    return starts


__all__ = ["solve_periodic"]
