"""Runs a backend off the main thread, so that signal handlers (which run only on the main
thread) can stop it, and leaves behind a backend that overruns its clock limit."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from .registry import Run
from .result import BackendResult, Status, joined_notes
from .settings import RunSettings
from .state import SearchState
from .view import ProblemView

# How long past its time limit a clocked backend may run before it is left behind: CP-SAT
# checks its clock only between propagation rounds, which can be long on large models.
OVERRUN_GRACE_S = 3.0


def run_in_thread(backend: Run, data: ProblemView, settings: RunSettings, state: SearchState,
                  clocked: bool) -> BackendResult:
    """The backend's result. A `clocked` backend still running `OVERRUN_GRACE_S` after its
    limit is told to stop and left behind (a daemon thread); its best schedule so far, when
    it reported one, is the result. A backend limited by work is never left behind."""
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["result"] = backend(data, settings, state)
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    began = time.monotonic()
    worker = threading.Thread(target=work, name="zbsolve-solver", daemon=True)
    worker.start()
    overran = False
    while worker.is_alive():
        worker.join(timeout=0.1)
        if clocked and time.monotonic() - began > settings.limit + OVERRUN_GRACE_S:
            overran = not state.stop.is_set()  # a user's interrupt is not an overrun
            state.stop.set()
            worker.join(timeout=0.5)
            if worker.is_alive():
                return _left_behind(settings, state, time.monotonic() - began, interrupted=not overran)
            break
    if "error" in outcome:
        raise outcome["error"]
    result = outcome["result"]
    if overran:  # it stopped when told to: not the user's interrupt, and said so
        result = replace(result, interrupted=False, message=joined_notes(_late(settings), result.message))
    return result


def _late(settings: RunSettings) -> str:
    return f"the search did not stop within {OVERRUN_GRACE_S:g} s of its {settings.limit:.3g} s limit"


def _left_behind(settings: RunSettings, state: SearchState, wall: float, interrupted: bool) -> BackendResult:
    late = _late(settings)
    if state.best_found is None:
        return BackendResult(Status.UNKNOWN, None, None, None, wall, message=late, interrupted=interrupted)
    starts, objective, pairs = state.best_found
    return BackendResult(Status.FEASIBLE, starts, objective, None, wall, pairs=pairs, interrupted=interrupted,
                         message=f"{late}: its best schedule so far is returned")
