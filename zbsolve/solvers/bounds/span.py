"""Bounds on one device's span: the other bounds with times measured from its first op."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .jackson import jackson_bound
from .memory import cooldown_bound, ops_work, warmup_bound
from .paths import UNREACHED, Paths

if TYPE_CHECKING:
    from zbsolve.solvers.base import SolveInput


def span_bound(data: SolveInput, device: int, paths: Paths) -> int:
    """The Jackson, warm-up and cool-down bounds on one device's span, with times measured from the
    device's first op: that op is the first F of one of its stages, so every op on the
    device starts no earlier than its longest path from that F (the least over the
    candidates), and is followed by its longest path to the end of an op on the device."""
    ops = data.device_ops[device]
    firsts = data.first_forwards(device)
    reached = {first: paths.longest_from(first) for first in firsts}
    # An F that another stage's F here leads to never comes first (interleaved:2: F of stage 8
    # after stage 0's, both on device 0), so the span counts from one that none leads to.
    starts = [reach for first, reach in reached.items()
              if all(other == first or reached[other][paths.index[first]] == UNREACHED for other in firsts)]
    to_end = paths.longest_to(ops)
    head, tail = {}, {}
    for op in ops:
        i = paths.index[op]
        head[op] = min((max(reach[i], 0) for reach in starts), default=0)
        tail[op] = to_end[i]
    return max(ops_work(data, ops), jackson_bound(data, ops, head, tail), warmup_bound(data, ops, head, tail),
               cooldown_bound(data, ops, head, tail), _through_others(data, device, paths, starts, to_end))


def _through_others(data: SolveInput, device: int, paths: Paths, starts: list[list[int]],
                    to_end: list[int]) -> int:
    """Another device's work that lies between this device's first op and its last: the ops
    there that every possible first op of this device reaches and that reach one of its
    ops start no earlier than their path from that first op and are followed by their path
    to the end of an op here, so a one-machine bound on them bounds this device's span.
    (1.5B at 2x: the last stage's 24 F and B between the first stage's start and its last
    B and W.) Without F&B pairs only: a pair could hide a backward's W that is not among them."""
    if data.pair_duration is not None or not starts:
        return 0
    best = 0
    for other, ops in enumerate(data.device_ops):
        if other == device:
            continue
        head, tail = {}, {}
        for op in ops:
            i = paths.index[op]
            if to_end[i] != UNREACHED and all(reach[i] != UNREACHED for reach in starts):
                head[op], tail[op] = min(reach[i] for reach in starts), to_end[i]
        if head:
            best = max(best, jackson_bound(data, list(head), head, tail))
    return best
