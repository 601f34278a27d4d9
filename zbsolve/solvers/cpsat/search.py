"""Running one CP-SAT search: its solution callback (progress, the best schedule kept), a
thread that stops it on Ctrl-C or when a phase gives up, the stall detector a phase gives up
with, and CP-SAT's status read as the backend's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

from zbsolve.solvers.result import Status
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from .pairs import Pairs

STATUS: dict[cp_model.CpSolverStatus, Status] = {
    cp_model.OPTIMAL: Status.OPTIMAL,
    cp_model.FEASIBLE: Status.FEASIBLE,
    cp_model.INFEASIBLE: Status.INFEASIBLE,
    cp_model.UNKNOWN: Status.UNKNOWN,
    cp_model.MODEL_INVALID: Status.UNKNOWN,
}


class Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, data: ProblemView, settings: RunSettings, state: SearchState, start: dict, pairs: Pairs | None,
                 bounds: bool = True,
                 t0: float | None = None) -> None:
        super().__init__()
        self.data, self.start, self.pairs = data, start, pairs
        self.settings, self.state = settings, state
        self.bounds = bounds  # False for a restricted model: its bound says nothing of the problem,
        # so the problem's own lower bound is shown instead
        self.t0 = time.monotonic() if t0 is None else t0  # the whole solve's, across its phases
        self.last_gain = time.monotonic()  # when the latest solution came (or the search began)

    def on_solution_callback(self) -> None:
        self.last_gain = time.monotonic()
        if self.state.stop.is_set():
            self.StopSearch()
        # Kept for a solve that must leave the search behind at its time limit.
        chosen = [pair for pair, x in self.pairs.literal.items() if self.BooleanValue(x)] if self.pairs else []
        self.state.best_found = ({op: self.Value(var) for op, var in self.start.items()},
                                int(self.ObjectiveValue()), chosen)
        if self.settings.progress:
            bound = self.BestObjectiveBound() if self.bounds else self.state.lower_bound()
            self.settings.progress(self.data.value(self.ObjectiveValue()), self.data.value(bound),
                               time.monotonic() - self.t0)


def run(state: SearchState, solver: cp_model.CpSolver, model: cp_model.CpModel, callback,
         give_up: Callable[[], bool] | None = None) -> cp_model.CpSolverStatus:
    """Solve, stopping soon after Ctrl-C, or once `give_up()` says so; CP-SAT's status code."""
    stopper = watch_stop(state, solver, give_up)
    try:
        return solver.Solve(model, callback)
    finally:
        stopper.set()


class Stall:
    """A `give_up` for `run`: true, and `stalled` from then on, once `seconds` pass after
    the search's latest solution (or its start) and `earliest` seconds after its start."""

    def __init__(self, progress: Progress, seconds: float, earliest: float) -> None:
        self.progress, self.seconds = progress, seconds
        self.not_before = time.monotonic() + earliest
        self.stalled = False

    def __call__(self) -> bool:
        now = time.monotonic()
        self.stalled = self.stalled or (now - self.progress.last_gain > self.seconds and now >= self.not_before)
        return self.stalled


def watch_stop(state: SearchState, solver: cp_model.CpSolver, give_up: Callable[[], bool] | None = None):
    """Stop the search soon after `state.stop` is set (Ctrl-C) or `give_up()` is true, even
    between solutions."""
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(0.2):
            if state.stop.is_set() or (give_up is not None and give_up()):
                solver.StopSearch()
                return

    threading.Thread(target=watch, daemon=True).start()
    return finished
