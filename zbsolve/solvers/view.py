"""The solvers' frozen view of a problem (`ProblemView`) and how it is built.

A backend reads the view, the run's settings and the search's state, and returns a
`result.BackendResult`. It never touches files, baselines or the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, reduce
from types import MappingProxyType
from typing import overload

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.problem import Problem

from .implied_edges import implied_edges, model_takes_memory_edges


@dataclass(frozen=True, eq=False)
class ProblemView:
    """The solvers' view of one problem, built once and never changed: ops, integer
    durations (solver units), dependencies, devices, memory effects, symmetry chains,
    implied edges, heads and tails. Run settings and search state live elsewhere
    (`settings.RunSettings`, `state.SearchState`)."""

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
    # The same problem with the memory edges the models leave out (see `implied_edges`), whose
    # heads and tails only the static bound reads.
    bound_view: ProblemView | None = field(default=None, repr=False)
    # Where the problem allows memory levers: its own graph; this view is then its relaxation
    # (`lever_relaxation`), whose bounds, heads and tails hold for every schedule with levers.
    lever_graph: OpGraph | None = field(default=None, repr=False)

    @overload
    def value(self, units: float) -> float: ...

    @overload
    def value(self, units: None) -> None: ...

    def value(self, units: float | None) -> float | None:
        """Solver units to the problem's time unit."""
        return None if units is None else self.graph.time(units * self.unit)

    @cached_property
    def rank(self) -> dict[Op, int]:
        """Each op's place in `topological`: breaks ties between equal start times, and
        indexes the bounds' path passes."""
        return {op: j for j, op in enumerate(self.topological)}

    def dependency_heads_and_tails(self) -> tuple[dict[Op, int], dict[Op, int]]:
        """Earliest starts and least remaining times along the dependencies alone (`head` and
        `tail` also follow memory-implied edges, derived for schedules that hold each
        activation from F to backward: not proven with memory levers)."""
        head: dict[Op, int] = {}
        for op in self.topological:  # an order that respects the dependencies too
            head[op] = max((head[p] + self.duration[p] + d for p, d in self.predecessors[op]), default=0)
        tail: dict[Op, int] = {}
        for op in reversed(self.topological):
            tail[op] = self.duration[op] + max((d + tail[s] for s, d in self.successors[op]), default=0)
        return head, tail

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
        and a scan of every op when it is not, hence cached."""
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

    @property
    def limits(self) -> list[int]:
        """Each device's memory limit, asked only by code that runs under one."""
        if self.memory_limit is None:
            raise ValueError("this problem has no memory limit")
        return self.memory_limit

    @property
    def pair_length(self) -> int:
        """An overlapped F&B pair's length, asked only by code that runs where pairs exist."""
        if self.pair_duration is None:
            raise ValueError("this problem has no F&B pairs")
        return self.pair_duration

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
        return min(self.duration[op], self.pair_length)

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
            return max(0, length + max(lengths) - self.pair_length) if lengths else 0

        by_forward = {key: best(key, n, backward_length) for key, n in forward_length.items()}
        by_backward = {key: best(key, n, forward_length) for key, n in backward_length.items()}
        return {op: (by_forward if op.kind == "F" else by_backward)[op.pipe, op.stage]
                for op in device_ops if op.kind in ("F", "B", "BW")}

    def _absorbed(self, op: Op) -> int:
        w = op.with_kind("W")
        return self.duration[w] if op.kind == "B" else 0

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
    """The most all pairs together can save, from `ProblemView.partner_savings`: each pair
    has one F and one backward, so neither side's total can be exceeded."""
    by_forward = sum(v for op, v in most.items() if op.kind == "F")
    by_backward = sum(v for op, v in most.items() if op.kind != "F")
    return min(by_forward, by_backward)


def lever_relaxation(problem: Problem) -> Problem:
    """The problem without levers, each stage holding from its F to its backward only what a
    recomputed forward keeps (its checkpoint) and after the backward the lesser of its
    residual and checkpoint; with the offload lever, nothing (an offloaded microbatch may
    hold nothing between its copies). Every schedule with levers, its R's and copies left
    out, is one of this problem's: they only add work and waits, and no level is higher
    here (docs/solving.md, "Memory levers"). So its optimum, and every bound of it, is at
    most the levers' optimum."""
    if "offload" in problem.levers:
        costs = tuple(replace(c, activation=0.0, residual=0.0, checkpoint=0.0) for c in problem.stage_costs)
    else:
        costs = tuple(replace(c, activation=c.checkpoint, residual=min(c.residual, c.checkpoint))
                      for c in problem.stage_costs)
    return replace(problem, stage_costs=costs, levers=())


def build_view(graph: OpGraph, split: bool, objective: str, every_memory_edge: bool = False) -> ProblemView:
    """The solvers' view of the problem. `every_memory_edge`: also the memory edges that the
    models leave out (see `implied_edges.model_takes_memory_edges`); without it, where such
    edges exist, `bound_view` holds that view for the static bound. A problem with levers is
    seen through its relaxation (`lever_relaxation`), its own graph kept as `lever_graph`."""
    if graph.problem.levers:
        relaxed = _build_view(OpGraph(lever_relaxation(graph.problem)), split, objective, every_memory_edge,
                              lever_graph=graph)
        return replace(relaxed, lever_graph=graph)
    return _build_view(graph, split, objective, every_memory_edge)


def _build_view(graph: OpGraph, split: bool, objective: str, every_memory_edge: bool,
                lever_graph: OpGraph | None = None) -> ProblemView:
    ops = graph.ops(split)
    # with levers the R's and copies are in the grid too (and the horizon): solver units must hold them exactly
    added = [] if lever_graph is None else [lever_graph.duration(op.with_kind(kind)) for op in ops if op.kind == "F"
                                             for kind in ("R", "O", "L")]  # O and L: 0 without the offload lever
    ticks = [graph.duration(op) for op in ops] + [graph.comm] + added
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
    horizon = sum(duration.values()) + edges * (graph.comm // unit) + sum(added) // unit
    # The view without what is derived from it (implied edges, heads, tails), which the
    # derivations read; the view returned holds them all from its construction on.
    base = ProblemView(
        graph=graph, ops=ops, duration=duration, predecessors=predecessors,
        device_ops=device_ops, memory_effect={op: graph.memory_effect(op) for op in ops},
        memory_limit=graph.memory_limit, chains=list(chains.values()), head={}, tail={},
        horizon=horizon, objective=objective, unit=unit,
        pair_duration=None if graph.fb_overlap is None else graph.fb_overlap // unit,
    )
    implied = implied_edges(base, every_memory_edge)
    # Earliest start and least remaining time, with each op at its shortest (pairs included),
    # along dependencies and the implied edges.
    before = {op: list(predecessors[op]) for op in ops}
    for a, b, delay in implied:
        before[b].append((a, delay))
    topological = topological_order(ops, before)
    head: dict[Op, int] = {}
    for op in topological:
        head[op] = max((head[p] + base.shortest(p) + d for p, d in before[op]), default=0)
    successors: dict[Op, list[tuple[Op, int]]] = {op: [] for op in ops}
    for op in ops:
        for pred, delay in before[op]:
            successors[pred].append((op, delay))
    tail: dict[Op, int] = {}
    for op in reversed(topological):
        tail[op] = base.shortest(op) + max((d + tail[s] for s, d in successors[op]), default=0)
    data = replace(base, implied=implied, before=before, topological=topological, head=head, tail=tail)
    if not every_memory_edge and data.memory_limit is not None and any(
            not model_takes_memory_edges(data, d) for d in range(len(device_ops))):
        data = replace(data, bound_view=_build_view(graph, split, objective, True, lever_graph))
    return data


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
