"""The CP-SAT model of a problem with memory levers (docs/solving.md, "Memory levers"): the
whole model of `formulation` less its memory-implied edges, plus, for each
microbatch at each stage, a literal per lever it allows (at most one true): recomputation
gives an optional R interval after the forward and before the backward on the device;
offload an optional copy O to host after the forward on the device's device-to-host channel
and an optional copy L back after it and before the backward on its host-to-device channel;
memory is held as the chosen way's intervals (`op_kinds.way_holds`), each optional on the
choice.

The view it is given is the problem's relaxation (`view.lever_relaxation`): its durations,
dependencies, heads and tails hold for every schedule with levers, and its bound is theirs.
The levers' own problem is `data.lever_graph`."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.problem.op_kinds import Kind, kinds_of, offloaded, recomputed, way_holds
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
        levers = graph.problem.levers
        backward = kinds_of(data.split)[1]  # B or BW: what waits for the activation
        # per forward: its choice literals, and each added op's start and end (absent: fixed)
        self.chosen: dict[str, dict[Op, cp_model.IntVar]] = {lever: {} for lever in levers}
        self.added_start: dict[Op, cp_model.IntVar] = {}
        self.added_end: dict[Op, cp_model.LinearExpr] = {}
        channels: dict[str, list[list]] = {"d2h": [[] for _ in data.device_ops], "h2d": [[] for _ in data.device_ops]}
        for f in forwards:
            device = graph.device(f)
            literals = [self.chosen[lever].setdefault(f, model.new_bool_var(f"{lever}{f}")) for lever in levers]
            model.add(sum(literals) <= 1)
            after = self.end[f]
            for lever, x in zip(levers, literals):
                kinds = (Kind.R.value,) if lever == "recompute" else (Kind.O.value, Kind.L.value)
                for kind in kinds:
                    op = f.with_kind(kind)
                    length = graph.duration(op) // unit
                    s = self.added_start[op] = model.new_int_var(0, H, f"s{op}")
                    e = self.added_end[op] = s + length
                    interval = model.new_optional_interval_var(s, length, e, x, f"i{op}")
                    resource = {"R": device_intervals, "O": channels["d2h"], "L": channels["h2d"]}[kind]
                    resource[device].append(interval)
                    model.add(s >= after).only_enforce_if(x)
                    model.add(s == self.end[f]).only_enforce_if(~x)  # an absent op's start is fixed
                    after = e
                model.add(self.start[f.with_kind(backward)] >= after).only_enforce_if(x)
                after = self.end[f]
        for intervals in device_intervals + channels["d2h"] + channels["h2d"]:
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
        """Each way's intervals, present when its choice is made (keep: no lever chosen)."""
        graph, model, split = self.graph, self.model, self.data.split
        keep = kinds_of(split)
        by_device: list[tuple[list, list]] = [([], []) for _ in range(graph.problem.devices)]
        for f in forwards:
            chosen = [self.chosen[lever][f] for lever in self.chosen]
            kept = model.new_bool_var(f"keep{f}")
            model.add(sum(chosen) + kept == 1)
            ways = [(keep, kept)] + [(recomputed(keep) if lever == "recompute" else offloaded(keep),
                                      self.chosen[lever][f]) for lever in self.chosen]
            amounts = graph.stage_memory(f.pipe, f.stage)
            for way, present in ways:
                for taken, given, amount in way_holds(way, *amounts):
                    if amount <= 0:
                        continue
                    begin = self.added_start.get(f.with_kind(taken), self.start.get(f.with_kind(taken)))
                    if begin is None:  # FC or FO: the forward's own start
                        begin = self.start[f]
                    finish = self.added_end[f.with_kind(given)] if f.with_kind(given) in self.added_end \
                        else self.end[f.with_kind(given)]
                    size = model.new_int_var(0, H, f"m{f}{taken}{given}")
                    intervals, demands = by_device[graph.device(f)]
                    intervals.append(model.new_optional_interval_var(begin, size, finish, present, f"mem{f}"))
                    demands.append(amount)
        for d, (intervals, demands) in enumerate(by_device):
            if intervals:
                model.add_cumulative(intervals, demands, limits[d])

    def add_hint(self, hint: dict[Op, int]) -> None:
        """A starting schedule's starts, its FC's and FO's under the F's name, its added ops under theirs."""
        for op, var in self.start.items():
            at = hint.get(op)
            if op.kind == "F" and at is None:
                at = hint.get(op.with_kind(Kind.FC.value), hint.get(op.with_kind(Kind.FO.value)))
            if at is not None:
                self.model.add_hint(var, at)
        for lever, literals in self.chosen.items():
            first = Kind.R.value if lever == "recompute" else Kind.O.value
            for f, x in literals.items():
                self.model.add_hint(x, f.with_kind(first) in hint)
        for op, var in self.added_start.items():
            if op in hint:
                self.model.add_hint(var, hint[op])

    def schedule(self, value) -> dict[Op, int]:
        """The solution's starts by the ops it runs: a recomputed F as FC and its R, an offloaded one as FO, O and L."""
        starts: dict[Op, int] = {}
        for op, var in self.start.items():
            lever = next((lever for lever, x in self.chosen.items() if op in x and value(x[op])), None)
            if lever is None:
                starts[op] = value(var)
                continue
            forward, added = ((Kind.FC.value, (Kind.R.value,)) if lever == "recompute"
                              else (Kind.FO.value, (Kind.O.value, Kind.L.value)))
            starts[op.with_kind(forward)] = value(var)
            for kind in added:
                starts[op.with_kind(kind)] = value(self.added_start[op.with_kind(kind)])
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
