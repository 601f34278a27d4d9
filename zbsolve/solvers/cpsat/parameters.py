"""CP-SAT's parameters for zbsolve's models: limits (the clock, or CP-SAT's work measure),
workers, seed, and the settings measured on the benchmark suite (docs/solving.md, section 5)."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

LP_FREE_FROM_OPS = 1000  # larger models search better without the LP relaxation
# Presolve probing's work limit with F&B pairs (CP-SAT's default is 1.0): the work measure
# undercounts on pair models, and uncapped probing left large ones no time to search.
PAIR_PROBING_WORK = 0.1
# A deterministic (one-worker) solve is limited by CP-SAT's work measure; the clock stops it
# anyway at this many times its limit, plus CLOCK_SLACK_S, counted over the whole backend,
# since the measure undercounts badly on F&B pair models. Elsewhere the backstop is far
# looser, so that a loaded machine does not change what a deterministic run writes.
CLOCK_BACKSTOP = 4.0
CLOCK_SLACK_S = 10.0
CLOCK_BACKSTOP_WITHOUT_PAIRS = 20.0
CLOCK_SLACK_WITHOUT_PAIRS_S = 60.0


def solver_for(data: ProblemView, settings: RunSettings, limit: float,
               deadline: float | None = None) -> cp_model.CpSolver:
    """A solver for the whole model (or a restriction of it) with the limit (seconds, or
    CP-SAT's work measure when deterministic, then stopped by the clock at `deadline` at the
    latest) and the settings measured on such models."""
    solver = limited(settings, limit, deadline)
    if len(data.ops) >= LP_FREE_FROM_OPS:
        solver.parameters.linearization_level = 0
    if data.pair_duration is not None:
        solver.parameters.probing_deterministic_time_limit = PAIR_PROBING_WORK
    return solver


def limited(settings: RunSettings, limit: float, deadline: float | None = None) -> cp_model.CpSolver:
    """A solver with CP-SAT's defaults, `data`'s workers and seed, and the limit."""
    solver = cp_model.CpSolver()
    if settings.deterministic:
        # A wall-clock limit cuts a single-threaded search at a point that depends on the
        # machine's load; deterministic time (CP-SAT's work measure) cuts it at the same
        # point every run.
        solver.parameters.max_deterministic_time = float(limit)
        deadline = clock_deadline(limit) if deadline is None else deadline
        solver.parameters.max_time_in_seconds = max(1.0, deadline - time.monotonic())
    else:
        solver.parameters.max_time_in_seconds = float(limit)
    solver.parameters.num_workers = int(settings.workers)
    solver.parameters.random_seed = int(settings.seed)
    solver.parameters.catch_sigint_signal = False  # zbsolve's own handler sets state.stop
    return solver


def spent(settings: RunSettings, solver: cp_model.CpSolver) -> float:
    """What a finished search used of its limit: work units when deterministic, else seconds."""
    return solver.ResponseProto().deterministic_time if settings.deterministic else solver.WallTime()


def clock_deadline(limit: float, pairs: bool = True) -> float:
    if pairs:
        return time.monotonic() + CLOCK_BACKSTOP * limit + CLOCK_SLACK_S
    return time.monotonic() + CLOCK_BACKSTOP_WITHOUT_PAIRS * limit + CLOCK_SLACK_WITHOUT_PAIRS_S


def clock_note(settings: RunSettings, state: SearchState, solver: cp_model.CpSolver, limit: float,
                search: str) -> str | None:
    """Says so when the clock, not the work limit, ended a deterministic search: then the
    result depends on the machine's speed and may not repeat."""
    if not settings.deterministic or state.stop.is_set():
        return None
    response = solver.ResponseProto()
    # Nothing else ends an unproven search early: CP-SAT stops a little before its clock
    # limit, so the wall time cannot tell.
    if response.status in (cp_model.OPTIMAL, cp_model.INFEASIBLE) or response.deterministic_time >= 0.99 * limit:
        return None
    return (f"the clock stopped the deterministic {search} after {response.wall_time:.0f} s, at "
            f"{response.deterministic_time:.2f} of its {limit:.3g} work units: it may not repeat exactly")
