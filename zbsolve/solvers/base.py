"""What every solver backend receives and returns.

A backend sees only a `SolveInput` (ops, integer durations, precedences, devices, memory
effects, bounds, a warm start) and returns a `BackendResult` (status, start times, value,
bound). It never touches files, baselines or the simulator; `zbsolve.solvers.solve` does.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, reduce
from types import MappingProxyType

from zbsolve.ops import Op, OpGraph

# progress(best value or None, bound or None, elapsed seconds), values in problem units.
Progress = Callable[[float | None, float | None, float], None]


def joined_notes(*parts: str | None) -> str | None:
    """Notes for a result's message, the empty ones left out."""
    return "; ".join(part for part in parts if part) or None


def runs_deterministic(workers: int, deterministic: bool | None) -> bool:
    """Whether a solve is limited by work, not the clock: asked for, or one worker by default."""
    return workers == 1 if deterministic is None else deterministic


@dataclass
class SolveInput:
    graph: OpGraph
    ops: list[Op]
    duration: dict[Op, int]  # in solver units (ticks / unit)
    predecessors: dict[Op, list[tuple[Op, int]]]
    device_ops: list[list[Op]]
    memory_effect: dict[Op, tuple[int, int]]
    memory_limit: list[int] | None
    chains: list[list[Op]]  # same-kind ops of one stage, in microbatch order (symmetry)
    head: dict[Op, int]  # earliest start from dependencies alone
    tail: dict[Op, int]  # shortest time from the op's start to the end of everything after it
    horizon: int
    objective: str
    unit: int  # ticks per solver unit
    pair_duration: int | None = None  # an overlapped F&B pair's length, when fb_overlap is set
    implied: list[tuple[Op, Op, int]] = field(default_factory=list)  # (a, b, delay): see _implied_edges
    before: dict[Op, list[tuple[Op, int]]] = field(default_factory=dict)  # dependencies + implied edges
    topological: list[Op] = field(default_factory=list)  # an order of ops that respects `before`
    hint: dict[Op, int] | None = None
    incumbent: int | None = None  # the starting schedule's objective: no worse is wanted
    best_found: tuple | None = None  # (starts, objective, pairs): a backend's latest solution, as it searches
    hint_pairs: set[tuple[Op, Op]] = field(default_factory=set)  # (F, B or BW) overlapped in the hint
    time_limit: float = 60.0
    workers: int = 1
    seed: int = 0
    deterministic: bool = False  # one worker: limit by a work measure, not the clock
    progress: Progress | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    _bound: int | None = field(default=None, repr=False)  # lower_bound(), computed once
    # The same problem with the memory edges the models leave out (see `_memory_edges`), whose
    # heads and tails only the static bound reads.
    bound_input: SolveInput | None = field(default=None, repr=False)

    def value(self, units: float | None) -> float | None:
        """Solver units to the problem's time unit."""
        return None if units is None else self.graph.time(units * self.unit)

    @cached_property
    def rank(self) -> dict[Op, int]:
        """Each op's place in `topological`: breaks ties between equal start times, and
        indexes the bounds' path passes."""
        return {op: j for j, op in enumerate(self.topological)}

    @cached_property
    def microbatch_ops(self) -> dict[tuple[int, int], list[Op]]:
        """The ops of each (pipe, microbatch), in `topological` order."""
        found: dict[tuple[int, int], list[Op]] = {}
        for op in self.topological:
            found.setdefault((op.pipe, op.microbatch), []).append(op)
        return found

    @cached_property
    def successors(self) -> dict[Op, list[tuple[Op, int]]]:
        """`predecessors` inverted: each op's dependants with their delays (every op a key)."""
        found: dict[Op, list[tuple[Op, int]]] = {op: [] for op in self.ops}
        for op in self.ops:
            for pred, delay in self.predecessors[op]:
                found[pred].append((op, delay))
        return found

    def objective_of(self, starts: dict[Op, int], ends: dict[Op, int] | None = None) -> int:
        """A schedule's objective in solver units, over all ops (a search may break the
        microbatch order the model's first forwards and sinks rely on). Each op ends at its
        start plus its duration unless `ends` says otherwise (F&B pairs)."""
        if ends is None:
            ends = {op: starts[op] + self.duration[op] for op in self.ops}
        if self.objective == "makespan":
            return max(ends.values(), default=0)
        return max((max(ends[op] for op in ops) - min(starts[op] for op in ops)
                    for ops in self.device_ops if ops), default=0)

    @cached_property
    def split(self) -> bool:
        """Whether backward is split into B and W: asked per device and stage by the bounds,
        and a scan of every op when it is not (fused: 0.12 s per 1,000 asks at P=1000 M=2)."""
        return any(op.kind == "B" for op in self.ops)

    @cached_property
    def starters(self) -> list[Op]:
        """The ops the models let start first: no dependency, and no op ahead of them in an
        ordered chain. Each schedule the models allow starts one of them at its earliest start,
        since from any op the ops it waits for lead back to one, each starting no later."""
        behind = {op for c in self.chains if self.ordered(c) for op in c[1:]}
        return [op for op in self.ops if not self.predecessors[op] and op not in behind]

    def sinks(self) -> list[Op]:
        """Backward ops that nothing waits for and that may end last: the last of each
        ordered chain, or every W when pairs may absorb any of them (see `ordered`)."""
        return [
            op for c in self.chains if c[-1].kind in ("W", "BW")
            for op in (c[-1:] if self.ordered(c) else c)
        ]

    def ordered(self, chain: list[Op]) -> bool:
        """Whether the ops of a chain may be taken in microbatch order without loss.

        Identical microbatches can be relabelled so each stage runs them in order, except
        W with F&B pairs: a pair absorbs its own microbatch's W, so a later microbatch's W
        may legitimately end before an earlier one's (DualPipe defers W this way).
        """
        return not (self.pair_duration is not None and chain[0].kind == "W")

    def shortest(self, op: Op) -> int:
        """The least time the op can occupy: a pair may be shorter than its halves, and a W
        absorbed into a pair takes no time of its own."""
        if self.pair_duration is None:
            return self.duration[op]
        if op.kind == "W":
            return 0
        return min(self.duration[op], self.pair_duration)

    def pair_saving(self, device_ops: list[Op]) -> int:
        """An upper bound on the device time F&B pairs can save on one device."""
        if self.pair_duration is None:
            return 0
        return all_pairs_saving(self.partner_savings(device_ops))

    def partner_savings(self, device_ops: list[Op]) -> dict[Op, int]:
        """For each F and backward among `device_ops`, the most one pair with another of
        them could save (F + backward + its W, less the pair). Costs depend on the stage
        only, so partners are compared stage by stage."""
        assert self.pair_duration is not None
        forward_length: dict[tuple[int, int], int] = {}
        backward_length: dict[tuple[int, int], int] = {}
        for op in device_ops:
            if op.kind == "F":
                forward_length[op.pipe, op.stage] = self.duration[op]
            elif op.kind in ("B", "BW"):
                backward_length[op.pipe, op.stage] = self.duration[op] + self._absorbed(op)

        def best(own: tuple[int, int], length: int, partners: dict[tuple[int, int], int]) -> int:
            lengths = [other for key, other in partners.items() if key != own]
            return max(0, length + max(lengths) - self.pair_duration) if lengths else 0

        by_forward = {key: best(key, n, backward_length) for key, n in forward_length.items()}
        by_backward = {key: best(key, n, forward_length) for key, n in backward_length.items()}
        return {op: (by_forward if op.kind == "F" else by_backward)[op.pipe, op.stage]
                for op in device_ops if op.kind in ("F", "B", "BW")}

    def _absorbed(self, op: Op) -> int:
        w = op.with_kind("W")
        return self.duration[w] if op.kind == "B" else 0

    def lower_bound(self) -> int:
        """A valid bound on the objective (see `bounds`), computed on first use."""
        if self._bound is None:
            from .bounds import lower_bound

            self._bound = lower_bound(self)
            if self.bound_input is not None:
                self._bound = max(self._bound, self.bound_input.lower_bound())
        return self._bound

    def raise_bound(self, units: int) -> None:
        """What a backend proved beyond `lower_bound()`, for the models it builds afterwards."""
        self._bound = max(self.lower_bound(), units)

    def take_incumbent(self, units: int) -> None:
        """A schedule of objective `units` is known: only one no worse is wanted, and for the
        makespan every op ends by then (narrow domains propagate far faster in large models)."""
        self.incumbent = units
        if self.objective == "makespan":
            self.horizon = min(self.horizon, units)

    def forward_chains(self, device: int) -> Mapping[tuple[int, int], list[Op]]:
        """The F's of each stage on `device`, in microbatch order, by (pipe, stage); a
        read-only view of the index, which the bounds ask for once per device or more."""
        return MappingProxyType(self._forward_chains_by_device[device])

    @cached_property
    def _forward_chains_by_device(self) -> list[dict[tuple[int, int], list[Op]]]:
        # Once for all devices: the bounds ask for every device, and a scan of all chains
        # per device grew with the square of the stage count.
        by_device: list[dict[tuple[int, int], list[Op]]] = [{} for _ in self.device_ops]
        for c in self.chains:
            if c[0].kind == "F":
                by_device[self.graph.device(c[0])][(c[0].pipe, c[0].stage)] = c
        return by_device

    def first_forwards(self, device: int) -> list[Op]:
        return [chain[0] for chain in self.forward_chains(device).values()]

    def last_backwards(self, device: int) -> list[Op]:
        return [op for op in self.sinks() if self.graph.device(op) == device]


def all_pairs_saving(most: dict[Op, int]) -> int:
    """The most all pairs together can save, from `SolveInput.partner_savings`: each pair
    has one F and one backward, so neither side's total can be exceeded."""
    by_forward = sum(v for op, v in most.items() if op.kind == "F")
    by_backward = sum(v for op, v in most.items() if op.kind != "F")
    return min(by_forward, by_backward)


def partners(pairs) -> dict[Op, Op]:
    """Each half of the overlapped (F, backward) pairs mapped to the other."""
    partner: dict[Op, Op] = {}
    for f, b in pairs:
        partner[f], partner[b] = b, f
    return partner


@dataclass
class BackendResult:
    status: str  # optimal | feasible | infeasible | unknown
    starts: dict[Op, int] | None
    objective: int | None
    bound: float | None  # solver units, may be fractional (LP bound)
    wall_time: float
    message: str | None = None
    interrupted: bool = False
    pairs: list[tuple[Op, Op]] = field(default_factory=list)  # (F, B or BW) run as overlapped pairs


def build_input(graph: OpGraph, split: bool, objective: str, every_memory_edge: bool = False) -> SolveInput:
    """The solvers' view of the problem. `every_memory_edge`: also the memory edges that the
    models leave out (F&B pairs on devices of several stages, see `_memory_edges`); without
    it, where such edges exist, `bound_input` holds that view for the static bound."""
    ops = graph.ops(split)
    ticks = [graph.duration(op) for op in ops] + [graph.comm]
    if graph.fb_overlap is not None:
        ticks.append(graph.fb_overlap)
    unit = reduce(math.gcd, ticks) or 1  # exact: every duration is a multiple of it
    duration = {op: graph.duration(op) // unit for op in ops}
    predecessors = {
        op: [(pred, delay // unit) for pred, delay in graph.predecessors(op, split)] for op in ops
    }
    device_ops: list[list[Op]] = [[] for _ in range(graph.problem.devices)]
    for op in ops:
        device_ops[graph.device(op)].append(op)
    chains: dict[tuple, list[Op]] = {}
    for op in ops:  # ops() lists microbatches in order within a pipe
        chains.setdefault((op.kind, op.pipe, op.stage), []).append(op)
    edges = sum(1 for op in ops for _, d in predecessors[op] if d)
    horizon = sum(duration.values()) + edges * (graph.comm // unit)
    data = SolveInput(
        graph=graph, ops=ops, duration=duration, predecessors=predecessors,
        device_ops=device_ops, memory_effect={op: graph.memory_effect(op) for op in ops},
        memory_limit=graph.memory_limit, chains=list(chains.values()), head={}, tail={},
        horizon=horizon, objective=objective, unit=unit,
        pair_duration=None if graph.fb_overlap is None else graph.fb_overlap // unit,
    )
    data.implied = _implied_edges(data, every_memory_edge)
    # Earliest start and least remaining time, with each op at its shortest (pairs included),
    # along dependencies and the implied edges.
    before = {op: list(predecessors[op]) for op in ops}
    for a, b, delay in data.implied:
        before[b].append((a, delay))
    topological = topological_order(ops, before)
    data.before, data.topological = before, topological
    for op in topological:
        data.head[op] = max((data.head[p] + data.shortest(p) + d for p, d in before[op]), default=0)
    successors: dict[Op, list[tuple[Op, int]]] = {op: [] for op in ops}
    for op in ops:
        for pred, delay in before[op]:
            successors[pred].append((op, delay))
    for op in reversed(topological):
        data.tail[op] = data.shortest(op) + max((d + data.tail[s] for s, d in successors[op]), default=0)
    if not every_memory_edge and data.memory_limit is not None and any(
            not _model_takes_memory_edges(data, d) for d in range(len(device_ops))):
        data.bound_input = build_input(graph, split, objective, every_memory_edge=True)
    return data


def _implied_edges(data: SolveInput, every_memory_edge: bool = False) -> list[tuple[Op, Op, int]]:
    """Triples (a, b, delay) with b starting no earlier than a's end plus the delay in some
    optimal schedule.

    - Chains: identical microbatches of one stage can be taken in order (`ordered`).
    - Memory: microbatches are alive on a device from their F to their backward, taken in
      order at every stage (see `_memory_edges`).
    """
    edges = [(a, b, 0) for chain in data.chains if data.ordered(chain) for a, b in zip(chain, chain[1:])]
    if data.memory_limit is None:
        return edges
    for d in range(len(data.device_ops)):
        if every_memory_edge or _model_takes_memory_edges(data, d):
            edges += _memory_edges(data, d)
    return edges


def _model_takes_memory_edges(data: SolveInput, d: int) -> bool:
    """Not with F&B pairs on devices of several stages: there the edges slowed CP-SAT's search
    (1.5B on DualPipe's placement at 1.125x, seeds 0 and 1: 1058.21 and 1056.99 ms against
    1050.65 and 1048.55 without them) and moved no bound of that instance. They hold there
    all the same, and under tighter memory they lift the static bound (`bound_input`)."""
    return data.pair_duration is None or len(data.forward_chains(d)) <= 1


def _memory_edges(data: SolveInput, d: int) -> list[tuple[Op, Op, int]]:
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
    0.75x (limit 3 activations, so k = 3) that is a W: the 1.5B bound at P=4 M=16 goes
    from 909.565 to 956.25 ms against an optimum of 1005.06.
    """
    backward = "B" if data.split else "BW"
    forwards = data.forward_chains(d)
    limit = data.memory_limit[d]
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


def _next_releases(data: SolveInput, backward: Op, lower: list[int]) -> list[int]:
    """The shortest lengths of the ops that can end next among those that free memory after
    `backward` (its W, the backwards of the `lower` stages on its device) or after it in
    microbatch order (the same backward of the next microbatch)."""
    found = [data.shortest(backward)]
    w = backward.with_kind("W")
    if w in data.memory_effect and data.memory_effect[w][1] > 0:
        found.append(data.shortest(w))
    found += [data.shortest(Op(backward.kind, backward.pipe, y, backward.microbatch)) for y in lower]
    return found


def topological_order(ops: list[Op], predecessors: dict[Op, list[tuple[Op, int]]]) -> list[Op]:
    order, seen = [], set()
    for root in ops:
        stack = [(root, False)]
        while stack:
            op, expanded = stack.pop()
            if expanded:
                order.append(op)
                continue
            if op in seen:
                continue
            seen.add(op)
            stack.append((op, True))
            stack.extend((p, False) for p, _ in predecessors[op] if p not in seen)
    return order
