"""CP-SAT model (DESIGN §7): build it, solve it, read the start times back."""

from __future__ import annotations

import threading
import time

from ortools.sat.python import cp_model

from zbsolve.ops import Op
from zbsolve.solvers.base import BackendResult, SolveInput

STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.UNKNOWN: "unknown",
    cp_model.MODEL_INVALID: "unknown",
}


def build_model(data: SolveInput):
    model = cp_model.CpModel()
    H = data.horizon
    start, end, interval = {}, {}, {}
    for op in data.ops:
        d = data.duration[op]
        name = str(op)
        start[op] = model.NewIntVar(data.head[op], H - data.tail[op], f"s{name}")
        end[op] = start[op] + d
        interval[op] = model.NewFixedSizeIntervalVar(start[op], d, f"i{name}")
    for op in data.ops:
        for pred, delay in data.predecessors[op]:
            model.Add(start[op] >= start[pred] + data.duration[pred] + delay)
    for chain in data.chains:  # identical microbatches: take them in order
        for a, b in zip(chain, chain[1:]):
            model.Add(start[b] >= start[a] + data.duration[a])
    for ops in data.device_ops:
        model.AddNoOverlap([interval[op] for op in ops])
    if data.memory_limit is not None:
        _add_memory(model, data, start, end)
    objective = _add_objective(model, data, start, end)
    return model, start, objective


def _add_memory(model, data: SolveInput, start, end) -> None:
    """Activation held from F's start to B's end, residual until W's end (DESIGN §4.2)."""
    H = data.horizon
    for d, ops in enumerate(data.device_ops):
        intervals, demands = [], []
        for op in ops:
            if op.kind != "F":
                continue
            activation, _ = data.memory_effect[op]
            if data.split:
                b = Op("B", op.pipe, op.stage, op.microbatch)
                w = Op("W", op.pipe, op.stage, op.microbatch)
                residual = data.memory_effect[w][1]
                held = [(b, activation - residual), (w, residual)]
            else:
                held = [(Op("BW", op.pipe, op.stage, op.microbatch), activation)]
            for release, amount in held:
                if amount <= 0:
                    continue
                size = model.NewIntVar(0, H, f"m{op}{release.kind}")
                intervals.append(model.NewIntervalVar(start[op], size, end[release], f"mem{op}{release.kind}"))
                demands.append(amount)
        if intervals:
            model.AddCumulative(intervals, demands, data.memory_limit[d])


def _add_objective(model, data: SolveInput, start, end):
    H = data.horizon
    if data.objective == "makespan":
        makespan = model.NewIntVar(data.lower_bound(), H, "makespan")
        for op in data.sinks():
            model.Add(makespan >= end[op])
        model.Minimize(makespan)
        return makespan
    span = model.NewIntVar(data.lower_bound(), H, "span")
    for d in range(len(data.device_ops)):
        first = model.NewIntVar(0, H, f"first{d}")
        last = model.NewIntVar(0, H, f"last{d}")
        for op in data.first_forwards(d):
            model.Add(first <= start[op])
        for op in data.last_backwards(d):
            model.Add(last >= end[op])
        model.Add(span >= last - first)
    model.Minimize(span)
    return span


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, data: SolveInput) -> None:
        super().__init__()
        self.data = data
        self.t0 = time.monotonic()

    def on_solution_callback(self) -> None:
        if self.data.stop.is_set():
            self.StopSearch()
        if self.data.progress:
            self.data.progress(
                self.data.value(self.ObjectiveValue()), self.data.value(self.BestObjectiveBound()),
                time.monotonic() - self.t0,
            )


def solve_cpsat(data: SolveInput) -> BackendResult:
    t0 = time.monotonic()
    model, start, objective = build_model(data)
    if data.hint:
        for op, value in data.hint.items():
            model.AddHint(start[op], value)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(data.time_limit)
    solver.parameters.num_workers = int(data.workers)
    solver.parameters.random_seed = int(data.seed)
    callback = _Progress(data)
    if data.progress:
        solver.best_bound_callback = lambda bound: data.progress(
            None, data.value(bound), time.monotonic() - t0
        )
    stopper = _watch_stop(data, solver)
    try:
        code = solver.Solve(model, callback)
    finally:
        stopper.set()
    status = STATUS[code]
    interrupted = data.stop.is_set() and code != cp_model.OPTIMAL
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = {op: solver.Value(var) for op, var in start.items()}
        value = int(solver.ObjectiveValue())
        bound = solver.BestObjectiveBound()
    else:
        starts, value, bound = None, None, None
    return BackendResult(
        status=status, starts=starts, objective=value, bound=bound,
        wall_time=time.monotonic() - t0, interrupted=interrupted,
    )


def _watch_stop(data: SolveInput, solver: cp_model.CpSolver):
    """Stop the search soon after `data.stop` is set (Ctrl-C), even between solutions."""
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(0.2):
            if data.stop.is_set():
                solver.StopSearch()
                return

    threading.Thread(target=watch, daemon=True).start()
    return finished
