"""Edges every optimal schedule may be taken to respect: microbatch order within a stage,
and the waits a device's memory limit forces (docs/solving.md, "Implied edges")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import producer


class ProblemView(Protocol):
    """What these edges read of the solvers' view (view.ProblemView, which builds them: the
    view imports this module, and this one names only what it needs)."""

    # read-only, as the frozen view's fields are
    @property
    def chains(self) -> list[list[Op]]: ...

    @property
    def device_ops(self) -> list[list[Op]]: ...

    @property
    def memory_effect(self) -> dict[Op, tuple[int, int]]: ...

    @property
    def memory_limit(self) -> list[int] | None: ...

    @property
    def pair_duration(self) -> int | None: ...

    @property
    def limits(self) -> list[int]: ...

    @property
    def split(self) -> bool: ...

    def ordered(self, chain: list[Op]) -> bool: ...

    def shortest(self, op: Op) -> int: ...

    def forward_chains(self, device: int) -> Mapping[tuple[int, int], list[Op]]: ...


def implied_edges(data: ProblemView, every_memory_edge: bool = False) -> list[tuple[Op, Op, int]]:
    """Triples (a, b, delay) with b starting no earlier than a's end plus the delay in some
    optimal schedule.

    - Chains: identical microbatches of one stage can be taken in order (`ordered`).
    - Memory: microbatches are alive on a device from their F to their backward, taken in
      order at every stage (see `memory_edges`).
    """
    edges = [(a, b, 0) for chain in data.chains if data.ordered(chain) for a, b in zip(chain, chain[1:])]
    if data.memory_limit is None:
        return edges
    for d in range(len(data.device_ops)):
        if every_memory_edge or model_takes_memory_edges(data, d):
            edges += memory_edges(data, d)
    return edges


def model_takes_memory_edges(data: ProblemView, d: int) -> bool:
    """Not with F&B pairs on devices of several stages: there the edges slowed CP-SAT's
    search and moved no bound. They hold there all the same, and under tighter memory they
    lift the static bound (`ProblemView.bound_view`)."""
    return data.pair_duration is None or len(data.forward_chains(d)) <= 1


def memory_edges(data: ProblemView, d: int) -> list[tuple[Op, Op, int]]:
    """Edges (backward of stage y, microbatch j - k) -> (F of stage x, microbatch j) for
    stages y <= x of one pipe on device d.

    Until its backward of stage y ends, a microbatch holds the activation of every stage
    y' <= y of its pipe here (their F's came first, their backwards come after). When the
    F of stage x, microbatch j starts, j holds S_x (the sum up to x) and, if the backward
    of stage y, microbatch j - k has not ended, so does each of j - k .. j - 1 hold S_y
    (in order, their F's have started and their backwards have not ended). With
    k = (limit - S_x) // S_y + 1 that is over the limit, so that backward ends first.
    (y = x, one stage per device: the F of j waits for the backward of j - room.)

    The edge waits longer when what j - k still holds after that backward (its residual,
    and the activations of its stages below y) would not fit beside the other k: then the
    F also waits until j - k releases something more (its W of stage y or a backward of a
    lower stage, each after that backward) or j - k + 1's backward of stage y ends (after
    j - k's, in order). The delay is the shortest of those ops. On one stage per device at
    0.75x (limit 3 activations, so k = 3) that is a W.
    """
    backward = producer("I", data.split)
    forwards = data.forward_chains(d)
    limit = data.limits[d]
    upto: dict[tuple[int, int], int] = {}  # (pipe, x) -> S_x, while every stage up to x holds memory
    for pipe in {q for q, _ in forwards}:
        total = 0
        for x in sorted(y for q, y in forwards if q == pipe):
            amount = data.memory_effect[forwards[(pipe, x)][0]][0]
            if amount <= 0:
                break
            total += amount
            upto[(pipe, x)] = total
    edges = []
    for (pipe, x), later in forwards.items():
        if (pipe, x) not in upto:
            continue
        for (q, y), held in upto.items():
            if q != pipe or y > x:
                continue
            k = (limit - upto[(pipe, x)]) // held + 1
            if k < 1:
                continue
            sample = Op(backward, pipe, y, forwards[(q, y)][0].microbatch)
            left = held - data.memory_effect[sample][1]  # what a microbatch holds after it
            delay = 0
            if upto[(pipe, x)] + (k - 1) * held + left > limit:
                delay = min(_next_releases(data, sample, [s for p, s in upto if p == pipe and s < y]))
            for j in range(k, len(later)):
                edges.append((Op(backward, pipe, y, forwards[(q, y)][j - k].microbatch), later[j], delay))
    return edges


def _next_releases(data: ProblemView, backward: Op, lower: list[int]) -> list[int]:
    """The shortest lengths of the ops that can end next among those that free memory after
    `backward` (its W, the backwards of the `lower` stages on its device) or after it in
    microbatch order (the same backward of the next microbatch)."""
    found = [data.shortest(backward)]
    w = backward.with_kind("W")
    if w in data.memory_effect and data.memory_effect[w][1] > 0:
        found.append(data.shortest(w))
    found += [data.shortest(Op(backward.kind, backward.pipe, y, backward.microbatch)) for y in lower]
    return found


