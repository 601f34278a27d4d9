"""One device as a single machine with heads and tails (Jackson's preemptive schedule),
with F&B pairs relaxed."""

from __future__ import annotations

import heapq
from itertools import accumulate
from typing import TYPE_CHECKING

from zbsolve.problem.op_graph import Op
from zbsolve.solvers.view import all_pairs_saving

if TYPE_CHECKING:
    from zbsolve.solvers.view import ProblemView


def jackson_bound(data: ProblemView, ops: list[Op], head: dict | None = None, tail: dict | None = None) -> int:
    """One device as a single machine with heads and tails, preemption allowed.

    Each op may start no earlier than its head and needs its tail after it ends; Jackson's
    preemptive schedule (always run the available op with the longest tail) minimises the
    latest end + tail exactly for that relaxation, so its value bounds the makespan.

    F&B pairs are relaxed in each of three ways, and the best bound is kept: ops at full
    length less the most all pairs could save (any pair, run as its halves one after the
    other, delays what follows by at most its saving); or each F shortened by the most a
    pair with it could save; or each backward's W (BW when fused) shortened so. In the
    last two, a pair's slot holds its parts at their shortened lengths one after the
    other, each starting no earlier than in the pair and ending no later, so every
    schedule with pairs maps to a one-machine schedule of the shortened ops.
    """
    head, tail = head or data.head, tail or data.tail
    if data.pair_duration is None:
        return _jackson(data, ops, head, tail, data.duration)
    most = data.partner_savings(ops)
    full = _jackson(data, ops, head, tail, data.duration)
    best = max(full - all_pairs_saving(most), _pair_count_bound(data, ops, head, tail, full, most))
    for shortened in _pair_relaxations(data, most):
        best = max(best, _jackson(data, ops, head, tail, shortened))
    return best


def _pair_count_bound(data: ProblemView, ops: list[Op], head: dict, tail: dict, full: int,
                      most: dict[Op, int]) -> int:
    """The least, over the number k of pairs the device runs, of two bounds that pull apart:
    the ops at full length less the k largest savings (falls with k), and a one-machine
    bound on k pair slots and the ops left unpaired (rises with k where a pair's window is
    narrow: no pair starts before a backward can, none ends later than a forward must).

    The second is Jackson's bound on: k jobs of the pair's length, released at the earliest
    a backward and a forward can both start, followed by the least time either needs after
    it; the shortest #F - k forwards, #backward - k backwards and #W - k W's (a pair
    absorbs only its own backward's W), each released and followed as the least of its
    kind. Lowering releases, tails and lengths only relaxes it, so whichever ops a schedule
    pairs, its makespan (span, with heads and tails on the device) is at least the bound
    for its own k. It binds on the middle devices of DualPipe's placement, whose first
    backward and last forward's tail leave a long time without pairs.
    """
    kinds: dict[str, list[Op]] = {"F": [], "B": [], "W": []}
    for op in ops:
        kinds["W" if op.kind == "W" else "F" if op.kind == "F" else "B"].append(op)
    forwards, backwards, weights = kinds["F"], kinds["B"], kinds["W"]
    if not forwards or not backwards:
        return full

    def least(group: list[Op], of) -> int:
        return min((of(op) for op in group), default=0)

    def after(op: Op) -> int:
        return tail[op] - data.shortest(op)

    def shortest_first(group: list[Op]) -> list[tuple[int, int, int]]:
        """The group as jobs with its least release and tail, shortest first (the ones left
        unpaired are taken from the front)."""
        release, needed = least(group, head.__getitem__), least(group, after)
        return [(release, length, needed) for length in sorted(data.duration[op] for op in group)]

    jobs_of = [shortest_first(group) for group in (forwards, backwards, weights)]
    release = max(least(forwards, head.__getitem__), least(backwards, head.__getitem__))
    needed = max(least(forwards, after), least(backwards, after))
    by_forward = list(accumulate(sorted((most[op] for op in forwards), reverse=True)))
    by_backward = list(accumulate(sorted((most[op] for op in backwards), reverse=True)))
    best = full
    for k in range(1, min(len(forwards), len(backwards)) + 1):
        saving = min(by_forward[k - 1], by_backward[k - 1])
        jobs = [(release, data.pair_length, needed)] * k
        for group in jobs_of:
            jobs += group[:max(0, len(group) - k)]
        best = min(best, max(full - saving, jackson_jobs(jobs)))
    return best


def _jackson(data: ProblemView, ops: list[Op], head: dict, tail: dict, duration: dict) -> int:
    return jackson_jobs([(head[op], duration[op], tail[op] - data.shortest(op)) for op in ops])


def jackson_jobs(jobs: list[tuple[int, int, int]]) -> int:
    """Jackson's preemptive schedule of (release, length, time needed after the end) jobs."""
    jobs = sorted(jobs)
    available: list[tuple[int, int]] = []  # (-tail, remaining time)
    time = best = 0
    i = 0
    while i < len(jobs) or available:
        if not available:
            time = max(time, jobs[i][0])
        while i < len(jobs) and jobs[i][0] <= time:
            _, length, after = jobs[i]
            heapq.heappush(available, (-after, length))
            i += 1
        negative_tail, remaining = heapq.heappop(available)
        run = remaining if i == len(jobs) else min(remaining, jobs[i][0] - time)
        time += run
        if run < remaining:  # a release may bring a longer tail: reconsider
            heapq.heappush(available, (negative_tail, remaining - run))
        else:
            best = max(best, time - negative_tail)
    return best


def _pair_relaxations(data: ProblemView, most: dict[Op, int]) -> list[dict[Op, int]]:
    """Durations with each pair's saving (`most`, from `partner_savings`) charged to its F,
    or to its backward's W (BW)."""
    relaxed = []
    forwards = {op: cut for op, cut in most.items() if op.kind == "F"}
    if all(cut <= data.duration[op] for op, cut in forwards.items()):
        relaxed.append({**data.duration, **{op: data.duration[op] - cut for op, cut in forwards.items()}})
    backwards = {_shrinks(op): cut for op, cut in most.items() if op.kind != "F"}
    if all(cut <= data.duration[op] for op, cut in backwards.items()):
        relaxed.append({**data.duration, **{op: data.duration[op] - cut for op, cut in backwards.items()}})
    return relaxed


def _shrinks(backward: Op) -> Op:
    """The op that takes a pair's saving on the backward side: placed last in the slot."""
    return backward.with_kind("W") if backward.kind == "B" else backward
