"""Bounds on one device's span: the other bounds with times measured from its first op."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zbsolve.problem.op_graph import Op

from .jackson import jackson_bound
from .memory import cooldown_bound, ops_work, warmup_bound
from .paths import UNREACHED, Paths

if TYPE_CHECKING:
    from zbsolve.solvers.view import ProblemView


def span_bound(data: ProblemView, device: int, paths: Paths) -> int:
    """The Jackson, warm-up and cool-down bounds on one device's span.

    Every op here starts no earlier than the device's first op plus its longest path from
    an op here, and is followed by its longest path to the end of an op here. Two frames
    stretch that. A device whose first op can come no later than this one's (an op of it
    leads to each op here) has its span within the span too, so ops here must also be
    followed by their paths to the end of its ops: the span holds from this device's first
    op to the later of the two last ends (V-shape: the last device's backwards travel on to
    device 0). Likewise a device whose last op can end no earlier lets heads count from its
    ops (fused backward: every device's BW leads to device 0's). Each frame gives a bound
    of its own; the two together do not."""
    ops = data.device_ops[device]
    head, tail = paths.longest_from(ops), paths.longest_to(ops)
    earlier, later = paths.starting_before(device), paths.ending_after(device)
    longer_tail = tail if len(earlier) == 1 else paths.longest_to(_ops_of(data, earlier))
    best = _in_frame(data, device, head, longer_tail)
    if len(later) > 1:
        best = max(best, _in_frame(data, device, paths.longest_from(_ops_of(data, later)), tail))
    return best


def _ops_of(data: ProblemView, devices: list[int]) -> list[Op]:
    return [op for d in devices for op in data.device_ops[d]]


def _by_op(data: ProblemView, values: list[int], ops: list[Op]) -> dict[Op, int]:
    """A longest-path pass's values (by position in `data.topological`) for these ops."""
    return {op: values[data.rank[op]] for op in ops}


def _in_frame(data: ProblemView, device: int, head: list[int], tail: list[int]) -> int:
    """The device's bounds with each op's head and tail (by position in `data.topological`)
    measured from the frame's start and to its end."""
    ops = data.device_ops[device]
    heads, tails = _by_op(data, head, ops), _by_op(data, tail, ops)
    return max(ops_work(data, ops), jackson_bound(data, ops, heads, tails), warmup_bound(data, ops, heads, tails),
               cooldown_bound(data, ops, heads, tails), _through_others(data, device, head, tail))


def _through_others(data: ProblemView, device: int, head: list[int], tail: list[int]) -> int:
    """Another device's work that lies within the frame: its ops that an op here leads to
    (or one the frame's heads count from) and that lead to an op the frame's tails count
    to start no earlier than their head and are followed by their tail, so a one-machine
    bound on them bounds the span (at loose memory, the last stage's F's and B's between
    the first stage's start and its last B and W). Without F&B pairs only: a pair could hide a
    backward's W that is not among them."""
    if data.pair_duration is not None:
        return 0
    index = data.rank
    best = 0
    for other, ops in enumerate(data.device_ops):
        if other == device:
            continue
        within = [op for op in ops if head[index[op]] != UNREACHED and tail[index[op]] != UNREACHED]
        if within:
            best = max(best, jackson_bound(data, within, _by_op(data, head, within), _by_op(data, tail, within)))
    return best
