"""Longest dependency paths: over all ops by position (the span's passes) and within one
microbatch (the memory bounds' trips)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import producer

if TYPE_CHECKING:
    from zbsolve.solvers.view import ProblemView


UNREACHED = -1


class Paths:
    """`data.before` by position in `data.topological`, for the span's longest-path passes
    (up to four per device over every op). Lists instead of dictionaries keyed by ops:
    these passes dominate the span bounds' time on large problems."""

    def __init__(self, data: ProblemView) -> None:
        self.ops = data.topological
        self.index = data.rank
        self.shortest = [data.shortest(op) for op in self.ops]
        self.device = [data.graph.device(op) for op in self.ops]
        self.devices = len(data.device_ops)
        # Each edge with its length: the predecessor's least duration plus the delay.
        self.before: list[list[tuple[int, int]]] = [[] for _ in self.ops]
        self.after: list[list[tuple[int, int]]] = [[] for _ in self.ops]
        for i, op in enumerate(self.ops):
            for pred, delay in data.before[op]:
                j = self.index[pred]
                self.before[i].append((j, self.shortest[j] + delay))
                self.after[j].append((i, self.shortest[j] + delay))

    def longest_from(self, sources: list[Op]) -> list[int]:
        """Longest path (start to start) from any of `sources` to each op (0 at a source);
        UNREACHED where none."""
        reach = [UNREACHED] * len(self.ops)
        for source in sources:
            reach[self.index[source]] = 0
        for i in range(min(self.index[op] for op in sources), len(self.ops)):
            best = reach[i]
            for j, length in self.before[i]:
                if reach[j] != UNREACHED and reach[j] + length > best:
                    best = reach[j] + length
            reach[i] = best
        return reach

    def starting_before(self, device: int) -> list[int]:
        """The devices (this one among them) whose first op starts no later than this
        device's: an op of theirs leads to each op here."""
        return self._device_links[0][device]

    def ending_after(self, device: int) -> list[int]:
        """The devices (this one among them) whose last op ends no earlier than this
        device's: each op here leads to an op of theirs."""
        return self._device_links[1][device]

    @cached_property
    def _device_links(self) -> tuple[list[list[int]], list[list[int]]]:
        # Per op, the devices of the ops that lead to it and of those it leads to, as bit sets.
        ancestors = [1 << d for d in self.device]
        for i in range(len(self.ops)):
            for j, _ in self.before[i]:
                ancestors[i] |= ancestors[j]
        descendants = [1 << d for d in self.device]
        for i in reversed(range(len(self.ops))):
            for j, _ in self.after[i]:
                descendants[i] |= descendants[j]
        every = (1 << self.devices) - 1
        common = ([every] * self.devices, [every] * self.devices)
        for i, d in enumerate(self.device):
            common[0][d] &= ancestors[i]
            common[1][d] &= descendants[i]
        before, after = ([[d for d in range(self.devices) if bits >> d & 1] for bits in sets] for sets in common)
        return before, after

    def longest_to(self, targets: list[Op]) -> list[int]:
        """Longest path from each op's start to the end of some op in `targets`; UNREACHED
        for ops that reach none."""
        wanted = {self.index[op] for op in targets}
        longest = [UNREACHED] * len(self.ops)
        for i in reversed(range(len(self.ops))):
            best = self.shortest[i] if i in wanted else UNREACHED
            for j, length in self.after[i]:
                if longest[j] != UNREACHED and length + longest[j] > best:
                    best = length + longest[j]
            longest[i] = best
        return longest


def microbatch_reach(data: ProblemView, source: Op) -> dict[Op, int]:
    """Longest dependency path from `source`'s start to the start of each op of its
    microbatch that follows it (and 0 to itself)."""
    reach = {source: 0}
    for op in data.microbatch_ops[source.pipe, source.microbatch]:  # dependencies stay in a microbatch
        if op == source:
            continue
        arrivals = [reach[p] + data.shortest(p) + d for p, d in data.predecessors[op] if p in reach]
        if arrivals:
            reach[op] = max(arrivals)
    return reach


def least_stays(data: ProblemView, forwards: list[Op]) -> dict[tuple[int, int], int]:
    """Per (pipe, stage) of `forwards`: the least time from an F's start to its backward's
    end (B, or BW when fused), its activation's stay on the device. Microbatches are
    identical, so one walk per stage."""
    backward = producer("I", data.split)
    stays: dict[tuple[int, int], int] = {}
    for f in forwards:
        if (f.pipe, f.stage) not in stays:
            b = f.with_kind(backward)
            stays[f.pipe, f.stage] = microbatch_reach(data, f)[b] + data.shortest(b)
    return stays
