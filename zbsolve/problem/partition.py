"""Which layers each stage holds (docs/design.md, "Layer partitions"): a profile's layers,
contiguous splits of them over a placement's stages, the splits users run (even,
torchtitan's default, the one that balances stage time) and a lower bound on the makespan of
every split that needs no solve (docs/solving.md, "The bound over every split")."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, TypeVar

from zbsolve.errors import UsageError
from zbsolve.problem.placements import build_pipes, build_problem, parse_memory, parse_placement
from zbsolve.problem.problem import Problem, StageCost

T = TypeVar("T")

# Splits counted one by one to find the least bound among them; above this, on a single chain
# a DP, elsewhere a branch and bound over the splits of at most this many steps, and past
# that a weaker bound that needs no count (the average device load).
COUNT_SPLITS_UP_TO = 200_000
SEARCH_STEPS = 300_000


@dataclass(frozen=True)
class Layer:
    """One layer of a profile: its name, the module names a runtime gives it (torchtitan's
    FQNs), and its costs."""

    name: str
    modules: tuple[str, ...]
    cost: StageCost


Split = tuple[int, ...]  # layers per stage, in the pipe's stage order


def stage_costs(layers: Sequence[Layer], split: Split) -> list[StageCost]:
    """One record per stage: the sums of its layers' costs (a fused time, a recompute time or a
    copy time only where every layer of the stage has one); its checkpoint is its first
    layer's, the stage's input (what a recomputed stage keeps)."""
    records, start = [], 0
    for count in split:
        part = [layer.cost for layer in layers[start:start + count]]
        fused = None if any(c.fused is None for c in part) else sum(c.fused or 0.0 for c in part)
        again = None if any(c.recompute is None for c in part) else sum(c.recompute or 0.0 for c in part)
        copy = None if any(c.offload is None for c in part) else sum(c.offload or 0.0 for c in part)
        records.append(StageCost(sum(c.F for c in part), sum(c.B for c in part), sum(c.W for c in part),
                                 sum(c.activation for c in part), sum(c.residual for c in part), fused=fused,
                                 recompute=again, checkpoint=part[0].checkpoint, offload=copy))
        start += count
    return records


def grouped(items: Sequence[Sequence[T]], split: Split) -> list[list[T]]:
    """Per-layer lists joined into per-stage ones: each stage's layers' items in order."""
    found, start = [], 0
    for count in split:
        found.append([item for layer in items[start:start + count] for item in layer])
        start += count
    return found


def stage_modules(layers: Sequence[Layer], split: Split) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(m) for m in grouped([layer.modules for layer in layers], split))


def stage_count(placement: str, devices: int, microbatches: int) -> int:
    """How many stages (cost records) the placement has: P, V x P or 2P."""
    return build_pipes(parse_placement(placement), devices, microbatches)[1]


def split_problems(layers: Sequence[Layer], devices: int, microbatches: int, *, placement: str = "single",
                   memory: str | float | Sequence[float] | None = None, **options: Any) -> Callable[[Split], Problem]:
    """The problem of each split of `layers` over the placement's stages (`build_problem`'s
    `options`), each carrying its split and its stages' modules. Every split is held to the
    same memory: a limit given as a multiple of U is resolved once, on the even split's."""

    def build(split: Split, amounts: Any) -> Problem:
        problem = build_problem(devices, microbatches, stage_costs(layers, split), per_stage=True,
                                placement=placement, memory=amounts, **options)
        return replace(problem, partition=split, stage_modules=stage_modules(layers, split))

    amounts = None
    if memory is not None:
        even = even_split(layers, stage_count(placement, devices, microbatches))
        amounts = parse_memory(memory, build(even, None))
    return lambda split: build(split, amounts)


def parse_split(text: str, layers: int, stages: int, sep: str = ",") -> Split:
    """`N,N,...` (`sep` between): layers per stage, every stage at least one, all layers placed."""
    try:
        split = tuple(int(part) for part in text.split(sep))
    except ValueError:
        raise UsageError(f"--partition must be auto, even or layers per stage like 4,5,5,4; got {text!r}") from None
    if len(split) != stages:
        raise UsageError(f"--partition {text} gives {len(split)} stages; this placement has {stages}")
    if min(split) < 1:
        raise UsageError(f"--partition {text}: every stage needs at least one layer")
    if sum(split) != layers:
        raise UsageError(f"--partition {text} places {sum(split)} layers; the profile has {layers}")
    return split


def _spread(count: int, parts: int) -> list[int]:
    """`count` items over `parts` as evenly as can be, the larger shares first (as torchtitan
    spreads them)."""
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _ends(layers: Sequence[Layer]) -> tuple[int, int]:
    """How many layers at the front (the embedding) and the back (the head and loss) are not
    transformer layers, by their names: the profile's first and last layers whose names do not
    start with `layers.` (torchtitan's naming), at most one each."""
    front = int(bool(layers) and not layers[0].name.startswith("layers."))
    back = int(len(layers) > front and not layers[-1].name.startswith("layers."))
    return front, back


def even_split(layers: Sequence[Layer], stages: int) -> Split:
    """The transformer layers spread evenly, the embedding with the first stage and the head
    with the last: what a split by layer count gives."""
    front, back = _ends(layers)
    body = len(layers) - front - back
    if len(layers) < stages:
        raise UsageError(f"{len(layers)} layers cannot fill {stages} stages: a stage holds at least one")
    if body < stages:  # too few to spread apart from the ends: every layer counts alike
        return tuple(_spread(len(layers), stages))
    counts = _spread(body, stages)
    counts[0] += front
    counts[-1] += back
    return tuple(counts)


def torchtitan_split(layers: Sequence[Layer], stages: int, first_less: int = 1, last_less: int = 1) -> Split:
    """torchtitan's default (`pipeline_parallel_first_stage_less_layers` and `_last_` both 1):
    the first and last stages count the embedding and the head as that many layers."""
    front, back = _ends(layers)
    body = len(layers) - front - back
    weighted = body + first_less + last_less
    if body < stages or stages < 2:
        return even_split(layers, stages)
    base, extra = divmod(weighted, stages)
    counts = [base + (1 if i < extra else 0) for i in range(stages)]
    counts[0] -= first_less
    counts[-1] -= last_less
    if min(counts) < 1 or sum(counts) != body:
        return even_split(layers, stages)
    counts[0] += front
    counts[-1] += back
    return tuple(counts)


def _prefix(values: Sequence[float]) -> list[float]:
    out = [0.0]
    for v in values:
        out.append(out[-1] + v)
    return out


def balanced_split(layers: Sequence[Layer], stages: int, split_backward: bool = True) -> Split:
    """The split whose slowest stage (F + backward) is fastest: the classic partition DP."""
    work = _prefix([layer.cost.F + layer.cost.backward_time(split_backward) for layer in layers])
    n = len(layers)
    best = [[math.inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for j in range(k, n - (stages - k) + 1):
            for i in range(k - 1, j):
                value = max(best[k - 1][i], work[j] - work[i])
                if value < best[k][j] - 1e-12:
                    best[k][j], cut[k][j] = value, i
    counts, j = [], n
    for k in range(stages, 0, -1):
        i = cut[k][j]
        counts.append(j - i)
        j = i
    return tuple(reversed(counts))


NAMED_SPLITS = ("even", "torchtitan", "balanced")  # the splits users run


def named_split(name: str, layers: Sequence[Layer], stages: int, split_backward: bool = True) -> Split:
    """One of NAMED_SPLITS of `layers` over `stages`."""
    if name == "even":
        return even_split(layers, stages)
    if name == "torchtitan":
        return torchtitan_split(layers, stages)
    if name == "balanced":
        return balanced_split(layers, stages, split_backward)
    raise UsageError(f"no split named {name!r}: one of {', '.join(NAMED_SPLITS)}")


def even_stage_costs(layers: Sequence[Layer], placement: str, devices: int, microbatches: int) -> list[StageCost]:
    """The stages' costs under the even split (what a share of F + B is taken of)."""
    return stage_costs(layers, even_split(layers, stage_count(placement, devices, microbatches)))


def every_split(layers: int, stages: int) -> Iterator[Split]:
    for cuts in combinations(range(1, layers), stages - 1):
        bounds = (0, *cuts, layers)
        yield tuple(b - a for a, b in zip(bounds, bounds[1:]))


def split_count(layers: int, stages: int) -> int:
    return math.comb(layers - 1, stages - 1) if 1 <= stages <= layers else 0


def neighbours(split: Split) -> list[Split]:
    """Splits one layer moved across one boundary."""
    found = []
    for k in range(len(split) - 1):
        for move in (-1, 1):
            counts = list(split)
            counts[k] += move
            counts[k + 1] -= move
            if min(counts) >= 1:
                found.append(tuple(counts))
    return found


@dataclass(frozen=True)
class Shape:
    """What the bound of a split reads of the problem: which device each stage runs on (per
    pipe, in stage order), microbatches per pipe, the per-op overhead and whether the
    backward is split."""

    devices: int
    pipes: tuple[tuple[tuple[int, ...], int], ...]  # (device of each stage, microbatches), per pipe
    op_overhead: float
    split_backward: bool

    @property
    def stages(self) -> int:
        return len(self.pipes[0][0])


def _parts(c: StageCost, split_backward: bool, overhead: float) -> tuple[float, float, float]:
    """A stage's forward, its backward that passes the gradient on (B, or BW), and its W (0 when
    fused), each with the per-op overhead."""
    if split_backward:
        return c.F + overhead, c.B + overhead, c.W + overhead
    return c.F + overhead, c.backward_time(False) + overhead, 0.0


def split_bound(shape: Shape, costs: Sequence[StageCost]) -> float:
    """A lower bound on the makespan of any schedule of the split with these stage costs
    (docs/solving.md, "The bound over every split"). A device runs one op at a time; it starts
    nothing before the first microbatch's forward reaches one of its stages (head); by the end
    of its last B (or BW) it has run all its F and B (load), and after it run its Ws not yet
    run, while that microbatch's gradient still passes back through the stages before that
    stage (tail, at least the least over the device's stages). Communication, memory and
    other waits are left out, so the bound holds whatever they are."""
    forward_backward = [0.0] * shape.devices
    weights = [0.0] * shape.devices
    head = [math.inf] * shape.devices
    tail = [math.inf] * shape.devices
    for stage_devices, microbatches in shape.pipes:
        reached = passed = 0.0
        for stage, device in enumerate(stage_devices):
            f, b, w = _parts(costs[stage], shape.split_backward, shape.op_overhead)
            forward_backward[device] += microbatches * (f + b)
            weights[device] += microbatches * w
            head[device] = min(head[device], reached)
            tail[device] = min(tail[device], passed)
            reached += f
            passed += b
    return max(head[d] + forward_backward[d] + max(weights[d], tail[d])
               for d in range(shape.devices) if math.isfinite(head[d]))


def least_bound(shape: Shape, layers: Sequence[Layer]) -> float:
    """The least `split_bound` over every contiguous split: counted split by split where they
    are few; else, on one pipe with a stage per device, by a DP over the last layer of each
    stage; else the average device load, which no split beats."""
    stages = shape.stages
    if split_count(len(layers), stages) <= COUNT_SPLITS_UP_TO:
        return min(split_bound(shape, stage_costs(layers, s)) for s in every_split(len(layers), stages))
    if len(shape.pipes) == 1 and list(shape.pipes[0][0]) == list(range(shape.devices)):
        return _chain_least_bound(shape, layers)
    found = _least_by_search(shape, layers)
    if found is not None:
        return found
    ops = 3 if shape.split_backward else 2
    total = sum(m * (sum(layer.cost.F + layer.cost.backward_time(shape.split_backward) for layer in layers)
                     + stages * ops * shape.op_overhead) for _, m in shape.pipes)
    return total / shape.devices


def _chain_least_bound(shape: Shape, layers: Sequence[Layer]) -> float:
    """On a single chain stage k runs on device k, so its head and tail are the F and the B of
    the layers before it: the bound of a split is the largest of its stages' terms, each set by
    the stage's first and last layer; a DP over those finds the least."""
    (_, M), = shape.pipes
    parts = [_parts(layer.cost, shape.split_backward, 0.0) for layer in layers]
    forward, backward = _prefix([p[0] for p in parts]), _prefix([p[1] for p in parts])
    weight = _prefix([p[2] for p in parts])
    o = shape.op_overhead
    n, stages = len(layers), shape.stages
    best = [[math.inf] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for j in range(k, n - (stages - k) + 1):
            for i in range(k - 1, j):
                head, tail = forward[i] + (k - 1) * o, backward[i] + (k - 1) * o
                fb = M * (forward[j] - forward[i] + backward[j] - backward[i] + 2 * o)
                w = M * (weight[j] - weight[i] + (o if shape.split_backward else 0.0))
                value = max(best[k - 1][i], head + fb + max(w, tail))
                best[k][j] = min(best[k][j], value)
    return best[stages][n]


class _OutOfStepsError(Exception):
    pass


def _least_by_search(shape: Shape, layers: Sequence[Layer], steps: int | None = None) -> float | None:
    """The least `split_bound` over every split by a depth-first search that gives stages their
    layers in the pipe's order: each device's term only grows as stages are added (its head and
    tail are set by its first stage, its loads only add), so a partial split whose largest term
    reaches the best complete one found is cut. None when it needs more than `steps` steps."""
    limit = SEARCH_STEPS if steps is None else steps
    parts = [_parts(layer.cost, shape.split_backward, 0.0) for layer in layers]
    pf, pb, pw = (_prefix([p[i] for p in parts]) for i in range(3))
    o, n, S = shape.op_overhead, len(layers), shape.stages
    w_overhead = o if shape.split_backward else 0.0
    on = [[(devices[k], m) for devices, m in shape.pipes] for k in range(S)]
    fb, w = [0.0] * shape.devices, [0.0] * shape.devices
    head, tail = [math.inf] * shape.devices, [math.inf] * shape.devices
    best = min(split_bound(shape, stage_costs(layers, s))
               for s in (even_split(layers, S), balanced_split(layers, S, shape.split_backward)))
    taken = 0

    def step(k: int, start: int, current: float) -> None:
        nonlocal best, taken
        if k == S:
            best = min(best, current)
            return
        for end in ([n] if k == S - 1 else range(start + 1, n - (S - k - 1) + 1)):
            taken += 1
            if taken > limit:
                raise _OutOfStepsError
            kept = [(d, fb[d], w[d], head[d], tail[d]) for d, _ in on[k]]
            f, b = pf[end] - pf[start] + o, pb[end] - pb[start] + o
            ww = pw[end] - pw[start] + w_overhead
            for d, m in on[k]:
                fb[d] += m * (f + b)
                w[d] += m * ww
                head[d] = min(head[d], pf[start] + k * o)
                tail[d] = min(tail[d], pb[start] + k * o)
            grown = max([current] + [head[d] + fb[d] + max(w[d], tail[d]) for d, _ in on[k]])
            if grown < best:
                step(k + 1, end, grown)
            for d, a, c, h, t in reversed(kept):
                fb[d], w[d], head[d], tail[d] = a, c, h, t

    try:
        step(0, 0, 0.0)
    except _OutOfStepsError:
        return None
    return best
