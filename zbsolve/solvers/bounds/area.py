"""Memory-time (area) bound: what a device's memory limit lets it hold over time.

Each F's activation stays on its device from the F's start to its backward's end (B, or
BW when fused), at least the path from the F through the rest of the pipe and back: its
stay. At any moment the activations held sum to at most the limit L (at most the fullest
set of them that fits: 6 of a size the limit holds 6.4 times), so over a schedule
of length T the stays' area (activation x least stay, summed) is at most L x T, less what
the ends cannot hold: the device's F's start one after another from the earliest F's head,
so by time t at most 1 + (t - head) / (shortest F) of them have started, and its
backwards end one after another, the last at least the least tail after a backward before
the end. Where memory holds fewer microbatches than it takes to cover their way through
the pipe and back, this can exceed the device's work plus its warm-up and cool-down
(interleaved placements at 0.5x). Below two microbatches the stays bound (`stays`) runs the stays as one machine.
"""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import allocates, producer

from .fill import most_held
from .paths import least_stays

if TYPE_CHECKING:
    from zbsolve.solvers.view import ProblemView


def area_bound(data: ProblemView, ops: list[Op], floor: int = 0) -> int:
    """Makespan: the least T whose memory-time (above) holds the device's stays, counted
    from time 0 with heads and tails. Span: the least length of the device's own span (its
    first F starts no earlier than its first op, its last backward ends no later than its
    last op). 0 without a memory limit, and where it cannot exceed `floor`, a makespan bound
    already known, at least the critical path (then no stay is walked)."""
    if data.memory_limit is None or not ops:
        return 0
    limit = data.limits[data.graph.device(ops[0])]
    backward = producer("I", data.split)
    forwards = [op for op in ops if allocates(op.kind) and data.memory_effect[op][0] > 0]
    if not forwards or sum(data.memory_effect[f][0] for f in forwards) <= limit:
        return 0  # memory holds every stay at once: at most the longest stay, which the paths count
    limit = most_held(limit, [data.memory_effect[f][0] for f in forwards])
    backwards = {f: f.with_kind(backward) for f in forwards}
    span = data.objective == "span"
    head = 0 if span else min(data.head[f] for f in forwards)
    tail = 0 if span else min(data.tail[b] - data.shortest(b) for b in backwards.values())
    ramp = _Ramp(sorted((data.memory_effect[f][0] for f in forwards), reverse=True), limit,
                 min(data.shortest(f) for f in forwards), min(data.shortest(b) for b in backwards.values()))
    if not span and floor > 0:
        # Within a schedule of length `floor` no stay is longer than what its F's head and its
        # backward's tail leave: if even those fit, nothing is gained, and the walk per stage
        # is skipped.
        most = sum(data.memory_effect[f][0] * (floor - data.head[f] - data.tail[b] + data.shortest(b))
                   for f, b in backwards.items())
        if ramp.held(floor, head, tail) >= most:
            return 0
    least_stay = least_stays(data, forwards)
    need = sum(data.memory_effect[f][0] * least_stay[f.pipe, f.stage] for f in forwards)
    low = -(-need // limit)  # memory full all the time
    high = low + head + tail + ramp.longest_loss_free()
    while low < high:  # the held area only grows with T
        middle = (low + high) // 2
        if ramp.held(middle, head, tail) >= need:
            high = middle
        else:
            low = middle + 1
    return low


class _Ramp:
    """How much a device can hold at each moment near its start and its end."""

    def __init__(self, sizes: list[int], limit: int, first_gap: int, last_gap: int) -> None:
        self.first_gap, self.last_gap = first_gap, last_gap
        # held_by[n]: the most n activations hold, capped by the limit; `filling` of them reach it
        self.held_by = [min(limit, total) for total in accumulate([0, *sizes])]
        self.filling = next((n for n, total in enumerate(self.held_by) if total >= limit), len(self.held_by) - 1)

    def longest_loss_free(self) -> int:
        """A length beyond which the ends' shortfall no longer grows: both ramps fit in it."""
        return (self.filling + 1) * (self.first_gap + self.last_gap) + 1

    def held(self, length: int, head: int, tail: int) -> int:
        """The most memory-time [0, length) can hold: at t at most the limit, what the F's
        started by t hold, and what the backwards that end after t hold."""
        points = {0, length}
        for n in range(self.filling + 1):
            points.add(head + n * self.first_gap)
            points.add(length - tail - n * self.last_gap)
        cuts = sorted(p for p in points if 0 <= p <= length)
        total = 0
        for start, end in zip(cuts, cuts[1:]):
            if end > start:
                total += (end - start) * self._level(start, length, head, tail)
        return total

    def _level(self, t: int, length: int, head: int, tail: int) -> int:
        started = 0 if t < head else self._count(t - head, self.first_gap, inclusive=True)
        left = max(0, length - tail - t)  # backwards ending after t end within (t, length - tail]
        ending = 0 if left <= 0 else self._count(left, self.last_gap, inclusive=False)
        return min(self.held_by[min(started, self.filling)], self.held_by[min(ending, self.filling)])

    def _count(self, distance: int, gap: int, inclusive: bool) -> int:
        """How many ops, each at least `gap` after the previous, fit from the first: F's
        started within `distance` of the first start (that one included), or backwards
        ending within `distance` before the last end."""
        if gap <= 0:
            return self.filling
        return distance // gap + 1 if inclusive else -(-distance // gap)
