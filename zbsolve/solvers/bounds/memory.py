"""Idle a memory limit forces on a device: before its first backward (warm-up), between
warm-up and cool-down (middle), and after its last forward (cool-down)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import TABLE, allocates, producer

from .fill import most_fill, most_length
from .paths import microbatch_reach

if TYPE_CHECKING:
    from zbsolve.solvers.view import ProblemView


def warmup_bound(data: ProblemView, ops: list[Op], head: dict | None = None, tail: dict | None = None) -> int:
    """Memory-limited warm-up: until a device's first backward starts, it can run only
    forwards, and only as many as its memory holds (nothing is released before a backward
    ends). So it idles for at least the wait for that first backward minus the forward
    work that fits in memory (`warmup_idle`), and everything else still follows.
    """
    idle = warmup_idle(data, ops, head)
    return 0 if idle is None else ops_work(data, ops) + idle + least_after(data, ops, tail)


def warmup_idle(data: ProblemView, ops: list[Op], head: dict | None = None) -> int | None:
    """Idle the device must spend before its first backward starts (None without a memory
    limit or a backward: no warm-up bound). The forward work that fits: where the F's sizes
    are equal, the longest that fit whole (at 0.8x on P=3, 2 of them, not 2.4); otherwise a
    fractional knapsack, an upper bound on what any set of forwards within the limit can take."""
    if data.memory_limit is None:
        return None
    head = head or data.head
    backwards = [op for op in ops if "I" in TABLE[op.kind].produces]
    if not backwards:
        return None
    first_backward = min(head[op] for op in backwards)
    room = data.limits[data.graph.device(ops[0])]
    fits = most_length(room, [(data.memory_effect[op][0], data.duration[op], 1) for op in ops if allocates(op.kind)])
    work = ops_work(data, ops)
    return first_backward + math.ceil(work - fits - 1e-9) - work


def cooldown_bound(data: ProblemView, ops: list[Op], head: dict | None = None, tail: dict | None = None) -> int:
    """Memory-limited cool-down.

    After the device's last F ends, its microbatch travels on to its next op here, its own
    backward (through the rest of the pipe and back when the stage is not the last), and
    then on to the end of its tail. Meanwhile the device can only run that microbatch's own
    backwards and W's and those of microbatches it holds in memory at that F's start: some
    waiting for their backward (each holding the activation), some for their W (each
    holding the residual), within the limit less what the last F's microbatch holds itself
    (on a V both of its stages here). What they cannot fill of the wait for its backward is
    idle; what they cannot fill of its tail is time the device's other work cannot shorten
    (on a V at 0.5x: the middle device's last B still has to go through every device
    below it).
    Either comes on top of the warm-up idle when the last F must follow a backward (more
    forwards than fit), as that idle lies before it, and so does the idle memory forces in
    between (`middle_idle`). With heads and tails measured on the
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
    limit = data.limits[device]
    tail = tail or data.tail
    least = least_after(data, ops, tail)
    candidates = []
    # From the last microbatch's F of each stage (any microbatch stands for all).
    reaches = {forwards[-1]: microbatch_reach(data, forwards[-1]) for forwards in stages.values()}
    for last, reach in reaches.items():
        if not any(Op("F", pipe, stage, last.microbatch) in reach for pipe, stage in stages if pipe == last.pipe
                   and stage != last.stage):  # another F here follows it: not the last
            after = tail[last] - data.shortest(last) - least  # beyond what every op here needs after it
            candidates.append(_cooldown_idle(data, stages, last, reach, limit, after))
    idle = min(candidates, default=0)  # never empty in practice: some F here has no F after it
    warm = max(0, warmup_idle(data, ops, head) or 0)
    # The last F then starts after a backward has ended, so after the warm-up's idle.
    disjoint = sum(data.memory_effect[f][0] for forwards in stages.values() for f in forwards) > limit
    idle_total = idle + warm + middle_idle(data, stages, limit, reaches) if disjoint else max(idle, warm)
    return math.ceil(ops_work(data, ops) + idle_total - 1e-9) + least


def middle_idle(data: ProblemView, stages: Mapping[tuple[int, int], list[Op]], limit: int,
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
    same memory, freed by those). What they cannot fill is idle (on a V at 0.5x, P=4, what
    a relaxation that keeps only the middle device finds); where the trip is shorter than
    the fill nothing is added.
    `reaches`: `microbatch_reach` from the last microbatch's F of each stage here, when known (any
    microbatch stands for all).
    """
    if data.pair_duration is not None or len({pipe for pipe, _ in stages}) != 1:
        return 0.0
    firsts = [chain[-1] for chain in stages.values()]  # one microbatch's F of each stage here
    reaches = reaches or {f: microbatch_reach(data, f) for f in firsts}
    lasts = [f for f in firsts if all(f in reaches[g] for g in firsts if g != f)]
    if len(lasts) != 1:
        return 0.0
    last = lasts[0]
    kind = producer("I", data.split)
    backward = Op(kind, last.pipe, last.stage, last.microbatch)
    after = microbatch_reach(data, backward)
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
              data.duration[f.with_kind("W")] if data.split else 0,
              data.memory_effect[f.with_kind("W")][1] if data.split else 0) for f in firsts]
    forwards = [(data.memory_effect[f][0], data.duration[f], count) for f in firsts]
    return windows * max(0.0, trip - most_fill(free, kinds) - most_length(free, forwards))


def _cooldown_idle(data: ProblemView, stages: Mapping[tuple[int, int], list[Op]], last: Op, reach: dict[Op, int],
                   limit: int, after: int) -> float:
    """Time after `last` (the device's last F) that no work here can fill: until its
    microbatch's backward may start here, and until `after` (the time its microbatch still
    needs after it, less what every op here needs after it) has passed. Only that
    microbatch's own backwards and W's and the fill of those held in memory remain to run."""
    kind = producer("I", data.split)
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
    fill = most_fill(max(0, limit - held), kinds)
    return max(0, trip - fill, after - own_work - fill)


def ops_work(data: ProblemView, ops: list[Op]) -> int:
    return sum(data.duration[op] for op in ops) - data.pair_saving(ops)


def least_after(data: ProblemView, ops: list[Op], tail: dict | None = None) -> int:
    tail = tail or data.tail
    return min(tail[op] - data.shortest(op) for op in ops)
