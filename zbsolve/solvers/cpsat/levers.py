"""The CP-SAT model of a problem with memory levers (docs/solving.md, "Memory levers"): the
whole model of `formulation` less its memory-implied edges, plus, for each
microbatch at each stage, a literal that chooses recomputation: an optional R interval after
the forward and before the backward, and memory held as the chosen way's intervals
(`op_kinds.way_holds`), each optional on the choice.

The view it is given is the problem's relaxation (`view.lever_relaxation`): its durations,
dependencies, heads and tails hold for every schedule with levers, and its bound is theirs.
The levers' own problem is `data.lever_graph`."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import Kind, kinds_of, recomputed, way_holds
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from . import parameters
from .search import STATUS, run


class _Model:
    def __init__(self, data: ProblemView, state: SearchState) -> None:
        graph = data.lever_graph
        assert graph is not None
        self.data, self.graph = data, graph
        unit = data.unit
        model = self.model = cp_model.CpModel()
        H = state.horizon
        head, tail = data.dependency_heads_and_tails()
        self.start = {op: model.new_int_var(head[op], H - tail[op], f"s{op}") for op in data.ops}
        self.end = {op: self.start[op] + data.duration[op] for op in data.ops}
        device_intervals: list[list] = [[] for _ in data.device_ops]
        for op in data.ops:
            interval = model.new_interval_var(self.start[op], data.duration[op], self.end[op], f"i{op}")
            device_intervals[graph.device(op)].append(interval)
            for pred, delay in data.predecessors[op]:
                model.add(self.start[op] >= self.end[pred] + delay)
        # identical microbatches in order at each stage, as in the model without levers (a
        # relabelling carries each op's lever choice with it); torch's runtime needs it too
        for chain in data.chains:
            if data.ordered(chain):
                for a, b in zip(chain, chain[1:]):
                    model.add(self.start[b] >= self.start[a] + data.shortest(a))
        forwards = [op for op in data.ops if op.kind == Kind.F.value]
        self.recompute: dict[Op, cp_model.IntVar] = {}
        self.r_start: dict[Op, cp_model.IntVar] = {}
        self.r_end: dict[Op, cp_model.LinearExpr] = {}
        backward = kinds_of(data.split)[1]  # B or BW: what waits for the activation
        for f in forwards:
            x = self.recompute[f] = model.new_bool_var(f"x{f}")
            length = graph.duration(f.with_kind(Kind.R.value)) // unit
            s = self.r_start[f] = model.new_int_var(0, H, f"s{f.with_kind('R')}")
            self.r_end[f] = s + length
            interval = model.new_optional_interval_var(s, length, s + length, x, f"i{f.with_kind('R')}")
            device_intervals[graph.device(f)].append(interval)
            model.add(s >= self.end[f]).only_enforce_if(x)
            model.add(self.start[f.with_kind(backward)] >= s + length).only_enforce_if(x)
            model.add(s == self.end[f]).only_enforce_if(~x)  # an absent R's start is fixed
        for intervals in device_intervals:
            model.add_no_overlap(intervals)
        if graph.memory_limit is not None:
            self._memory(forwards, H, graph.memory_limit)
        self.makespan = model.new_int_var(state.lower_bound(), H, "makespan")
        # every op nothing waits for (the view's sinks assume microbatches in order, which
        # this model does not impose)
        for op in data.ops:
            if not data.successors[op]:
                model.add(self.makespan >= self.end[op])
        model.minimize(self.makespan)

    def _memory(self, forwards: list[Op], H: int, limits: list[int]) -> None:
        """Each way's intervals, present when its choice is made (keep: not x; recompute: x)."""
        graph, model, split = self.graph, self.model, self.data.split
        keep = kinds_of(split)
        ways = ((keep, False), (recomputed(keep), True))
        by_device: list[tuple[list, list]] = [([], []) for _ in range(graph.problem.devices)]
        for f in forwards:
            x = self.recompute[f]
            amounts = graph.stage_memory(f.pipe, f.stage)
            for way, recomputes in ways:
                present = x if recomputes else ~x
                for taken, given, amount in way_holds(way, *amounts):
                    if amount <= 0:
                        continue
                    begin = self.r_start[f] if taken == Kind.R.value else self.start[f.with_kind(
                        "F" if taken == Kind.FC.value else taken)]
                    finish = self.r_end[f] if given == Kind.R.value else self.end[f.with_kind(given)]
                    size = model.new_int_var(0, H, f"m{f}{taken}{given}{recomputes}")
                    intervals, demands = by_device[graph.device(f)]
                    intervals.append(model.new_optional_interval_var(begin, size, finish, present, f"mem{f}"))
                    demands.append(amount)
        for d, (intervals, demands) in enumerate(by_device):
            if intervals:
                model.add_cumulative(intervals, demands, limits[d])

    def add_hint(self, hint: dict[Op, int]) -> None:
        """A starting schedule's starts, its FC's under the F's name and its R's under theirs."""
        for op, var in self.start.items():
            at = hint.get(op, hint.get(op.with_kind(Kind.FC.value))) if op.kind == "F" else hint.get(op)
            if at is not None:
                self.model.add_hint(var, at)
        for f, x in self.recompute.items():
            r = hint.get(f.with_kind(Kind.R.value))
            self.model.add_hint(x, r is not None)
            if r is not None:
                self.model.add_hint(self.r_start[f], r)

    def schedule(self, value) -> dict[Op, int]:
        """The solution's starts by the ops it runs: a recomputed F as FC, and its R."""
        starts: dict[Op, int] = {}
        for op, var in self.start.items():
            recomputes = op.kind == "F" and bool(value(self.recompute[op]))
            starts[op.with_kind(Kind.FC.value) if recomputes else op] = value(var)
            if recomputes:
                starts[op.with_kind(Kind.R.value)] = value(self.r_start[op])
        return starts


class _Kept(cp_model.CpSolverSolutionCallback):
    def __init__(self, built: _Model, settings: RunSettings, state: SearchState, t0: float) -> None:
        super().__init__()
        self.built, self.settings, self.state, self.t0 = built, settings, state, t0

    def on_solution_callback(self) -> None:
        if self.state.stop.is_set():
            self.StopSearch()
        self.state.best_found = (self.built.schedule(self.Value), int(self.ObjectiveValue()), [])
        if self.settings.progress:
            data = self.built.data
            self.settings.progress(data.value(self.ObjectiveValue()), data.value(self.BestObjectiveBound()),
                                   time.monotonic() - self.t0)


def solve_levers(data: ProblemView, settings: RunSettings, state: SearchState) -> BackendResult:
    """The lever model searched for the whole limit; `optimal` only when CP-SAT proves it."""
    t0 = time.monotonic()
    built = _Model(data, state)
    if state.hint:
        built.add_hint(state.hint)
    solver = parameters.limited(settings, settings.limit)
    callback = _Kept(built, settings, state, t0)
    code = run(state, solver, built.model, callback)
    status = STATUS[code]
    wall = time.monotonic() - t0
    if status in (Status.OPTIMAL, Status.FEASIBLE):
        return BackendResult(status, built.schedule(solver.Value), int(solver.ObjectiveValue()),
                             solver.BestObjectiveBound(), wall, interrupted=state.stop.is_set())
    bound = solver.BestObjectiveBound() if status == Status.UNKNOWN else None
    return BackendResult(status, None, None, bound, wall, interrupted=state.stop.is_set())
