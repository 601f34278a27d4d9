"""Lower bounds on the objective, from relaxations that any schedule must satisfy.

Every bound here is in solver units and is valid for the problem as the solvers see it
(split or fused backward, F&B pairs, memory limits). The reported bound of a solve is
the best of these and of what the backend proves.
"""

from __future__ import annotations

import heapq
import math
from itertools import accumulate, product
from typing import TYPE_CHECKING

from zbsolve.ops import Op
from zbsolve.solvers.base import all_pairs_saving

if TYPE_CHECKING:
    from zbsolve.solvers.base import SolveInput


def lower_bound(data: SolveInput) -> int:
    """The best of the bounds below."""
    if data.objective == "span":
        paths = _Paths(data)
        return max((span_bound(data, d, paths) for d, ops in enumerate(data.device_ops) if ops), default=0)
    best = max((data.head[op] + data.tail[op] for op in data.ops), default=0)  # critical path
    for ops in data.device_ops:
        if ops:
            best = max(best, jackson_bound(data, ops), warmup_bound(data, ops), cooldown_bound(data, ops))
    return best


UNREACHED = -1


class _Paths:
    """`data.before` by position in `data.topological`, for the span's longest-path passes
    (two or three per device over every op). Lists instead of dictionaries keyed by ops:
    under cProfile on 24,576 ops the passes took 1.7 s instead of 23.6 s."""

    def __init__(self, data: SolveInput) -> None:
        self.ops = data.topological
        self.index = data.rank
        self.shortest = [data.shortest(op) for op in self.ops]
        # Each edge with its length: the predecessor's least duration plus the delay.
        self.before: list[list[tuple[int, int]]] = [[] for _ in self.ops]
        self.after: list[list[tuple[int, int]]] = [[] for _ in self.ops]
        for i, op in enumerate(self.ops):
            for pred, delay in data.before[op]:
                j = self.index[pred]
                self.before[i].append((j, self.shortest[j] + delay))
                self.after[j].append((i, self.shortest[j] + delay))

    def longest_from(self, source: Op) -> list[int]:
        """Longest path (start to start) from `source` to each op; UNREACHED where none."""
        first = self.index[source]
        reach = [UNREACHED] * len(self.ops)
        reach[first] = 0
        for i in range(first + 1, len(self.ops)):
            best = UNREACHED
            for j, length in self.before[i]:
                if reach[j] != UNREACHED and reach[j] + length > best:
                    best = reach[j] + length
            reach[i] = best
        return reach

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


def span_bound(data: SolveInput, device: int, paths: _Paths) -> int:
    """The Jackson, warm-up and cool-down bounds on one device's span, with times measured from the
    device's first op: that op is the first F of one of its stages, so every op on the
    device starts no earlier than its longest path from that F (the least over the
    candidates), and is followed by its longest path to the end of an op on the device."""
    ops = data.device_ops[device]
    starts = [paths.longest_from(first) for first in data.first_forwards(device)]
    to_end = paths.longest_to(ops)
    head, tail = {}, {}
    for op in ops:
        i = paths.index[op]
        head[op] = min((max(reach[i], 0) for reach in starts), default=0)
        tail[op] = to_end[i]
    return max(_work(data, ops), jackson_bound(data, ops, head, tail), warmup_bound(data, ops, head, tail),
               cooldown_bound(data, ops, head, tail), _through_others(data, device, paths, starts, to_end))


def _through_others(data: SolveInput, device: int, paths: _Paths, starts: list[list[int]],
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


def jackson_bound(data: SolveInput, ops: list[Op], head: dict | None = None, tail: dict | None = None) -> int:
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


def _pair_count_bound(data: SolveInput, ops: list[Op], head: dict, tail: dict, full: int,
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
    for its own k. 1.5B on DualPipe's placement: 992.02 -> 1015.92 (the middle devices,
    whose first backward and last forward's tail leave 414 ms without pairs).
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
        jobs = [(release, data.pair_duration, needed)] * k
        for group in jobs_of:
            jobs += group[:max(0, len(group) - k)]
        best = min(best, max(full - saving, _jackson_jobs(jobs)))
    return best


def _jackson(data: SolveInput, ops: list[Op], head: dict, tail: dict, duration: dict) -> int:
    return _jackson_jobs([(head[op], duration[op], tail[op] - data.shortest(op)) for op in ops])


def _jackson_jobs(jobs: list[tuple[int, int, int]]) -> int:
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


def _pair_relaxations(data: SolveInput, most: dict[Op, int]) -> list[dict[Op, int]]:
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
    return Op("W", backward.pipe, backward.stage, backward.microbatch) if backward.kind == "B" else backward


def warmup_bound(data: SolveInput, ops: list[Op], head: dict | None = None, tail: dict | None = None) -> int:
    """Memory-limited warm-up: until a device's first backward starts, it can run only
    forwards, and only as many as its memory holds (nothing is released before a backward
    ends). So it idles for at least the wait for that first backward minus the forward
    work that fits in memory, and everything else still follows.

    The forward work that fits is a fractional knapsack (most time per byte first), an
    upper bound on what any set of forwards within the limit can take.
    """
    if data.memory_limit is None:
        return 0
    head, tail = head or data.head, tail or data.tail
    backwards = [op for op in ops if op.kind in ("B", "BW")]
    if not backwards:
        return 0
    first_backward = min(head[op] for op in backwards)
    room = data.memory_limit[data.graph.device(ops[0])]
    fits = 0.0
    forwards = sorted((op for op in ops if op.kind == "F"),
                      key=lambda op: -data.duration[op] / max(data.memory_effect[op][0], 1e-300))
    for op in forwards:
        size, length = data.memory_effect[op][0], data.duration[op]
        if size <= room:
            fits += length
            room -= size
        else:
            fits += length * room / size
            break
    return first_backward + math.ceil(_work(data, ops) - fits - 1e-9) + _least_after(data, ops, tail)


def _warmup_idle(data: SolveInput, ops: list[Op], head: dict | None, tail: dict | None) -> float:
    """Idle time the device must spend before its first backward starts."""
    return warmup_bound(data, ops, head, tail) - _work(data, ops) - _least_after(data, ops, tail)


def cooldown_bound(data: SolveInput, ops: list[Op], head: dict | None = None, tail: dict | None = None) -> int:
    """Memory-limited cool-down.

    After the device's last F ends, its microbatch travels on to its next op here, its own
    backward (through the rest of the pipe and back when the stage is not the last), and
    then on to the end of its tail. Meanwhile the device can only run that microbatch's own
    backwards and W's and those of microbatches it holds in memory at that F's start: some
    waiting for their backward (each holding the activation), some for their W (each
    holding the residual), within the limit less what the last F's microbatch holds itself
    (on a V both of its stages here). What they cannot fill of the wait for its backward is
    idle; what they cannot fill of its tail is time the device's other work cannot shorten
    (1.5B at 0.5x on a V: the middle device's last B still has 67.5 ms to go through
    devices 6 to 0, where the static bound stopped at its start: 1306.96 -> 1369.80 ms).
    Either comes on top of the warm-up idle when the last F must follow a backward (more
    forwards than fit), as that idle lies before it, and so does the idle memory forces in
    between (`_middle_idle`). With heads and tails measured on the
    device (`span_bound`) the sum bounds its span too.

    Which stage's F comes last is not known where several could (DualPipe's two pipes):
    the least idle over them counts. Microbatches are identical, so any microbatch stands
    for a stage's last F. With F&B pairs, only on devices that hold one stage.
    """
    if data.memory_limit is None or not ops:
        return 0
    device = data.graph.device(ops[0])
    stages = data.forward_chains(device)
    if not stages or (data.pair_duration is not None and len(stages) > 1):
        return 0
    limit = data.memory_limit[device]
    tail = tail or data.tail
    least = _least_after(data, ops, tail)
    candidates = []
    reaches = {forwards[-1]: _reach(data, forwards[-1]) for forwards in stages.values()}  # the last microbatch's
    for last, reach in reaches.items():
        if not any(Op("F", pipe, stage, last.microbatch) in reach for pipe, stage in stages if pipe == last.pipe
                   and stage != last.stage):  # another F here follows it: not the last
            after = tail[last] - data.shortest(last) - least  # beyond what every op here needs after it
            candidates.append(_cooldown_idle(data, stages, last, reach, limit, after))
    idle = min(candidates, default=0)  # never empty in practice: some F here has no F after it
    warm = max(0.0, _warmup_idle(data, ops, head, tail))
    # The last F then starts after a backward has ended, so after the warm-up's idle.
    disjoint = sum(data.memory_effect[f][0] for forwards in stages.values() for f in forwards) > limit
    idle_total = idle + warm + _middle_idle(data, stages, limit, reaches) if disjoint else max(idle, warm)
    return math.ceil(_work(data, ops) + idle_total - 1e-9) + least


def _middle_idle(data: SolveInput, stages: dict[tuple[int, int], list[Op]], limit: int,
                 reaches: dict[Op, dict[Op, int]] | None = None) -> float:
    """Idle between the warm-up and the cool-down, forced by memory (one pipe, no pairs).

    Let s be the device's stage whose F comes last in each microbatch and whose backward
    comes first, every other release here waiting for it, and let the limit hold C whole
    microbatches (all their F's here). Microbatches are taken in order, so when the F of s
    of microbatch m + C starts, the F's of microbatches 0 to m + C have all started; as
    nothing of microbatch m or later is released before the backward of s of m ends, that
    F starts after it. So the windows from the end of the F of s to the start of the
    backward of s, of microbatches C, 2C, ... (while another C follow), do not overlap, lie
    after the first backward's start and before the last F's start: apart from the warm-up's
    and the cool-down's idle. Each is at least the microbatch's trip from one to the other,
    and within it the device can only run backwards and W's of earlier microbatches (at
    most what they offer within the memory that microbatch m leaves) and F's (within the
    same memory, freed by those). What they cannot fill is idle. At P=4 on a V at 0.5x
    (1.5B costs) that is 12.6 ms per window, what a relaxation that keeps only the middle
    device finds; at P=8 the trip is shorter than the fill and nothing is added.
    `reaches`: `_reach` from the last microbatch's F of each stage here, when known (any
    microbatch stands for all).
    """
    if data.pair_duration is not None or len({pipe for pipe, _ in stages}) != 1:
        return 0.0
    firsts = [chain[-1] for chain in stages.values()]  # one microbatch's F of each stage here
    reaches = reaches or {f: _reach(data, f) for f in firsts}
    lasts = [f for f in firsts if all(f in reaches[g] for g in firsts if g != f)]
    if len(lasts) != 1:
        return 0.0
    last = lasts[0]
    kind = "B" if data.split else "BW"
    backward = Op(kind, last.pipe, last.stage, last.microbatch)
    after = _reach(data, backward)
    releases = [Op(k, f.pipe, f.stage, f.microbatch) for f in firsts for k in ((kind, "W") if data.split else (kind,))]
    per_microbatch = sum(data.memory_effect[f][0] for f in firsts)
    if any(r not in after for r in releases) or per_microbatch <= 0:
        return 0.0
    held = limit // per_microbatch
    count = len(next(iter(stages.values())))
    windows = (count - 1) // held - 1 if held > 0 else 0
    if windows < 1:
        return 0.0
    trip = reaches[last][backward] - data.duration[last]
    free = limit - per_microbatch
    kinds = [(count, data.memory_effect[f][0], data.duration[Op(kind, f.pipe, f.stage, f.microbatch)],
              data.duration[Op("W", f.pipe, f.stage, f.microbatch)] if data.split else 0,
              data.memory_effect[Op("W", f.pipe, f.stage, f.microbatch)][1] if data.split else 0) for f in firsts]
    forwards = [(data.memory_effect[f][0], data.duration[f], count) for f in firsts]
    return windows * max(0.0, trip - _most_fill(free, kinds) - _fractional(free, forwards))


COOLDOWN_CASES = 20_000  # fill combinations counted exactly; beyond, a fractional relaxation


def _cooldown_idle(data: SolveInput, stages: dict[tuple[int, int], list[Op]], last: Op, reach: dict[Op, int],
                   limit: int, after: int) -> float:
    """Time after `last` (the device's last F) that no work here can fill: until its
    microbatch's backward may start here, and until `after` (the time its microbatch still
    needs after it, less what every op here needs after it) has passed. Only that
    microbatch's own backwards and W's and the fill of those held in memory remain to run."""
    kind = "B" if data.split else "BW"
    trip = reach.get(Op(kind, last.pipe, last.stage, last.microbatch), 0) - data.duration[last]
    held, own_work, kinds = 0, 0, []
    for (pipe, stage), forwards in stages.items():
        own = pipe == last.pipe and Op(kind, pipe, stage, last.microbatch) in reach  # not ended yet
        backward = Op(kind, pipe, stage, forwards[0].microbatch)
        w = Op("W", pipe, stage, forwards[0].microbatch)
        if own:
            held += data.memory_effect[forwards[0]][0]
            own_work += data.duration[backward] + (data.duration[w] if data.split else 0)
        kinds.append((len(forwards) - own, data.memory_effect[forwards[0]][0], data.duration[backward],
                      data.duration[w] if data.split else 0, data.memory_effect[w][1] if data.split else 0))
    fill = _most_fill(max(0, limit - held), kinds)
    return max(0, trip - fill, after - own_work - fill)


def _most_fill(free: int, kinds: list[tuple[int, int, int, int, int]]) -> float:
    """The most backward and W work that microbatches held within `free` memory can offer.

    Each kind (one stage) has `count` microbatches, each waiting for its backward (holding
    `activation`, offering the backward and its W) or for its W (holding `residual`), or done.
    """
    choices = [range(count + 1) if activation <= 0 else range(min(count, free // activation) + 1)
               for count, activation, *_ in kinds]
    if math.prod(len(c) for c in choices) > COOLDOWN_CASES:
        items = [(a, b + w, n) for n, a, b, w, _ in kinds] + [(r, w, n) for n, _, _, w, r in kinds]
        return _fractional(free, items)
    best = 0.0
    for waiting in product(*choices):
        room = free - sum(n * kind[1] for n, kind in zip(waiting, kinds))
        if room < 0:
            continue
        deferred = [(r, w, count - n) for n, (count, _, _, w, r) in zip(waiting, kinds) if w > 0 and count > n]
        work = sum(n * (b + w) for n, (_, _, b, w, _) in zip(waiting, kinds))
        best = max(best, work + _most_w(room, deferred))
    return best


def _most_w(room: int, items: list[tuple[int, int, int]]) -> float:
    """The most W work (size, length, count) that fits `room`: exact when the sizes are equal
    (the longest first), otherwise the fractional knapsack, which is an upper bound."""
    free = sum(length * count for size, length, count in items if size <= 0)
    items = [item for item in items if item[0] > 0]
    if len({size for size, _, _ in items}) <= 1:
        fits = room // items[0][0] if items else 0
        for _, length, count in sorted(items, key=lambda item: -item[1]):
            taken = min(count, fits)
            free, fits = free + taken * length, fits - taken
        return free
    return free + _fractional(room, items)


def _fractional(room: float, items: list[tuple[int, int, int]]) -> float:
    """Fractional knapsack over (size, length, count): the most length within `room`."""
    total = 0.0
    for size, length, count in sorted(items, key=lambda item: -item[1] / item[0] if item[0] > 0 else -math.inf):
        if size <= 0:
            total += length * count
            continue
        taken = min(count, room / size)
        total, room = total + taken * length, room - taken * size
        if room <= 0:
            break
    return total


def _reach(data: SolveInput, source: Op) -> dict[Op, int]:
    """Longest dependency path from `source`'s start to the start of each op of its
    microbatch that follows it (and 0 to itself)."""
    from zbsolve.solvers.base import _topological

    ops = [op for op in data.ops if op.pipe == source.pipe and op.microbatch == source.microbatch]
    reach = {source: 0}
    for op in _topological(ops, {op: data.predecessors[op] for op in ops}):  # edges stay in a microbatch
        if op == source:
            continue
        arrivals = [reach[p] + data.shortest(p) + d for p, d in data.predecessors[op] if p in reach]
        if arrivals:
            reach[op] = max(arrivals)
    return reach


def _work(data: SolveInput, ops: list[Op]) -> int:
    return sum(data.duration[op] for op in ops) - data.pair_saving(ops)


def _least_after(data: SolveInput, ops: list[Op], tail: dict | None = None) -> int:
    tail = tail or data.tail
    return min(tail[op] - data.shortest(op) for op in ops)
