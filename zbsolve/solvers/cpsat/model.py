"""CP-SAT model (docs/solving.md): build it, solve it, read the start times back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

from zbsolve.solvers.result import BackendResult, joined_notes
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from . import mirror, pair_window, relaxed, window
from .formulation import build_model
from .hints import add_hint
from .pairs import Pairs

# Parameters chosen on the benchmark suite (docs/solving.md, section 5).
LP_FREE_FROM_OPS = 1000  # larger models search better without the LP relaxation
# Where the mirror-image search with F&B pairs is the answer, pair window search takes the
# rest of the limit once this share passes without a better schedule, but not before the
# second share (`pair_window`): the mirrored LNS tends to stop on plateaus.
PAIR_WINDOW_STALL = 0.15
PAIR_WINDOW_NOT_BEFORE = 0.5
WINDOW_SHARE = 0.5  # of the limit left to the window search, where it runs (see `window`)
WINDOW_FROM_OPS = 1000
# Presolve probing's work limit with F&B pairs (CP-SAT's default is 1.0): the work measure
# undercounts on pair models, and uncapped probing left large ones no time to search.
PAIR_PROBING_WORK = 0.1
# Small models where the bound phase runs get a short search of the whole model first: such
# models are often proven at once, before the bound phase would spend its share.
PROBE_SHARE = 0.05  # of the limit
PROBE_UP_TO_OPS = 400

MIRRORED_BEST = "best schedule from the mirror-image search"  # never proven: see `mirror`
# A deterministic (one-worker) solve is limited by CP-SAT's work measure; the clock stops it
# anyway at this many times its limit, plus CLOCK_SLACK_S, counted over the whole backend,
# since the measure undercounts badly on F&B pair models. Elsewhere the backstop is far
# looser, so that a loaded machine does not change what a deterministic run writes.
CLOCK_BACKSTOP = 4.0
CLOCK_SLACK_S = 10.0
CLOCK_BACKSTOP_WITHOUT_PAIRS = 20.0
CLOCK_SLACK_WITHOUT_PAIRS_S = 60.0

STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.UNKNOWN: "unknown",
    cp_model.MODEL_INVALID: "unknown",
}


class _Progress(cp_model.CpSolverSolutionCallback):
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


def solve_cpsat(data: ProblemView, settings: RunSettings, state: SearchState) -> BackendResult:
    """The whole model, then (large models without pairs, wall-clock limits) window search
    from its best schedule for the rest of the limit. Otherwise, on a mirror-symmetric
    problem, mirror-image schedules are searched first and hint the whole model (from
    `mirror.ALONE_FROM_OPS` ops with F&B pairs they are the answer, searched among the pairs
    near the starting schedule's, `mirror.pairs_within`). Before all that, where
    the device relaxations' bound phase runs, a short search of the whole model (small
    models, `_probe`), then the phase (`_raise_bound`)."""
    t0 = time.monotonic()
    deadline = _clock_deadline(settings.time_limit, data.pair_duration is not None)  # deterministic only
    windows = not settings.deterministic and data.pair_duration is None and len(data.ops) >= WINDOW_FROM_OPS
    limit = settings.time_limit * (1 - WINDOW_SHARE if windows else 1)
    # Where window search runs, a mirrored phase did not help: window search takes its place.
    alone = data.pair_duration is not None and len(data.ops) >= mirror.ALONE_FROM_OPS
    small = len(data.ops) <= PROBE_UP_TO_OPS and relaxed.eligible(data, settings, state)
    probed, probing = _probe(data, settings, state, t0, deadline) if small else (None, 0.0)
    if probed is not None and (probed.status == "optimal" or state.stop.is_set()):
        probed.interrupted = probed.status != "optimal"
        probed.wall_time = time.monotonic() - t0
        return probed
    raised, note, spent = _raise_bound(data, settings, state, t0, deadline)
    spent += probing
    if raised is not None and state.incumbent is not None and raised >= state.incumbent:
        return BackendResult("optimal", None, None, raised, time.monotonic() - t0, message=joined_notes(
            note, "the starting schedule meets it"))
    limit = max(1.0, limit - spent)
    # Where the mirrored phase is the answer, pair window search takes over when it stalls (on
    # the clock, for the makespan).
    stall = None
    if alone and not settings.deterministic and data.objective == "makespan":
        stall = (limit * PAIR_WINDOW_STALL, limit * PAIR_WINDOW_NOT_BEFORE)
    share = 1.0 if alone else mirror.MIRROR_SHARE
    mirrored = None if windows else _search_mirrored(data, settings, state, limit * share, deadline, stall=stall)
    if mirrored is not None and mirrored.starts is not None:
        if mirrored.objective <= state.lower_bound():  # proven by the problem's own bound
            mirrored.status, mirrored.message = "optimal", "the mirror-image schedule meets the lower bound"
        elif alone:
            mirrored.message = joined_notes(MIRRORED_BEST, mirrored.message)
        if state.stop.is_set() or mirrored.status == "optimal" or alone:
            mirrored.interrupted = state.stop.is_set() and mirrored.status != "optimal"
            mirrored.wall_time = time.monotonic() - t0
            mirrored.bound, mirrored.message = raised, joined_notes(note, mirrored.message)
            return mirrored
    if mirrored is not None:  # the whole model keeps at least a moment to take the hint
        limit = max(1.0, limit - mirrored.wall_time)
    model, start, pairs = _hinted_model(data, state)
    solver = _solver(data, settings, limit, deadline)
    if settings.progress:
        solver.best_bound_callback = lambda bound: settings.progress(
            None, data.value(bound), time.monotonic() - t0
        )
    code = _run(state, solver, model, _Progress(data, settings, state, start, pairs, t0=t0))
    status = STATUS[code]
    starts, value, bound, chosen = None, None, None, []
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = {op: solver.Value(var) for op, var in start.items()}
        value = int(solver.ObjectiveValue())
        bound = solver.BestObjectiveBound()
        chosen = pairs.chosen(solver) if pairs is not None else []
    searched = "search of the whole model" if mirrored else "search"
    message = joined_notes(mirrored.message if mirrored else None,
                           _clock_note(settings, state, solver, limit, searched))
    if mirrored is not None and mirrored.starts is not None and (value is None or mirrored.objective < value):
        # What the mirrored model proved holds only among mirror images: never `optimal`.
        starts, value, chosen, status = mirrored.starts, mirrored.objective, mirrored.pairs, "feasible"
        message = joined_notes(MIRRORED_BEST, message)
    left = settings.time_limit - (time.monotonic() - t0)
    origin = starts or state.hint
    if windows and code != cp_model.OPTIMAL and origin and not state.stop.is_set() and left > 1.0:
        def better(found: dict, found_value: int) -> None:
            state.best_found = (found, found_value, [])
            if settings.progress:
                settings.progress(data.value(found_value), data.value(bound), time.monotonic() - t0)

        found, steps, improved = window.search(data, settings, state, origin, left, better)
        message = f"window search: {improved} improvement(s) in {steps} step(s)"
        if improved:
            starts, value, status = found, data.objective_of(found), "feasible"
    if starts is None and probed is not None:  # what follows the short search looks only for better
        starts, value, status, chosen = probed.starts, probed.objective, "feasible", probed.pairs
    interrupted = state.stop.is_set() and status != "optimal"
    if raised is not None:
        bound = raised if bound is None else max(bound, raised)
    return BackendResult(
        status=status, starts=starts, objective=value, bound=bound, message=joined_notes(note, message),
        wall_time=time.monotonic() - t0, interrupted=interrupted, pairs=chosen,
    )


def _probe(data: ProblemView, settings: RunSettings, state: SearchState, t0: float,
           deadline: float) -> tuple[BackendResult | None, float]:
    """A short search of the whole model before the bound phase: small models are often
    proven within it. Its result (proven, or a schedule better than the starting one, which
    then hints what follows) or None, and the share of the limit it spent."""
    model, start, pairs = _hinted_model(data, state)
    solver = _solver(data, settings, PROBE_SHARE * settings.time_limit, deadline)
    code = _run(state, solver, model, _Progress(data, settings, state, start, pairs, t0=t0))
    spent = _spent(settings, solver)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, spent
    starts, value = {op: solver.Value(var) for op, var in start.items()}, int(solver.ObjectiveValue())
    chosen = pairs.chosen(solver) if pairs is not None else []  # none today: `relaxed.eligible` has no pairs
    if code == cp_model.OPTIMAL:
        return BackendResult("optimal", starts, value, value, spent, pairs=chosen,
                             message="proven by a short search of the whole model"), spent
    state.raise_bound(int(solver.BestObjectiveBound()))
    if state.incumbent is None or value < state.incumbent:
        state.hint, state.hint_pairs = starts, set(chosen)
        state.take_incumbent(value)
    return BackendResult("feasible", starts, value, None, spent, pairs=chosen), spent


def _raise_bound(data: ProblemView, settings: RunSettings, state: SearchState, t0: float,
                 deadline: float) -> tuple[int | None, str | None, float]:
    """The device relaxations' bound phase (see `relaxed`) where it applies: the bound it
    proved in solver units (also raised in `data`, so the whole model starts from it) or
    None, a note saying so, and the share of the limit it spent."""
    if not relaxed.eligible(data, settings, state):
        return None, None, 0.0

    def ask(model: cp_model.CpModel, limit: float) -> tuple[int, float]:
        solver = _limited(settings, limit, deadline)
        code = _run(state, solver, model, None)
        return code, _spent(settings, solver)

    def progress(proven: int) -> None:
        if settings.progress:
            settings.progress(None, data.value(proven), time.monotonic() - t0)

    proven, device, spent = relaxed.raise_bound(data, state, relaxed.SHARE * settings.time_limit, ask, progress)
    if proven is None:
        return None, None, spent
    state.raise_bound(proven)
    return proven, f"bound from device {device}'s relaxation with the memory limit", spent


def _solver(data: ProblemView, settings: RunSettings, limit: float, deadline: float | None = None) -> cp_model.CpSolver:
    """A solver for the whole model (or a restriction of it) with the limit (seconds, or
    CP-SAT's work measure when deterministic, then stopped by the clock at `deadline` at the
    latest) and the settings measured on such models."""
    solver = _limited(settings, limit, deadline)
    if len(data.ops) >= LP_FREE_FROM_OPS:
        solver.parameters.linearization_level = 0
    if data.pair_duration is not None:
        solver.parameters.probing_deterministic_time_limit = PAIR_PROBING_WORK
    return solver


def _limited(settings: RunSettings, limit: float, deadline: float | None = None) -> cp_model.CpSolver:
    """A solver with CP-SAT's defaults, `data`'s workers and seed, and the limit."""
    solver = cp_model.CpSolver()
    if settings.deterministic:
        # A wall-clock limit cuts a single-threaded search at a point that depends on the
        # machine's load; deterministic time (CP-SAT's work measure) cuts it at the same
        # point every run.
        solver.parameters.max_deterministic_time = float(limit)
        deadline = _clock_deadline(limit) if deadline is None else deadline
        solver.parameters.max_time_in_seconds = max(1.0, deadline - time.monotonic())
    else:
        solver.parameters.max_time_in_seconds = float(limit)
    solver.parameters.num_workers = int(settings.workers)
    solver.parameters.random_seed = int(settings.seed)
    solver.parameters.catch_sigint_signal = False  # zbsolve's own handler sets state.stop
    return solver


def _spent(settings: RunSettings, solver: cp_model.CpSolver) -> float:
    """What a finished search used of its limit: work units when deterministic, else seconds."""
    return solver.ResponseProto().deterministic_time if settings.deterministic else solver.WallTime()


def _clock_deadline(limit: float, pairs: bool = True) -> float:
    if pairs:
        return time.monotonic() + CLOCK_BACKSTOP * limit + CLOCK_SLACK_S
    return time.monotonic() + CLOCK_BACKSTOP_WITHOUT_PAIRS * limit + CLOCK_SLACK_WITHOUT_PAIRS_S


def _clock_note(settings: RunSettings, state: SearchState, solver: cp_model.CpSolver, limit: float,
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


def _search_mirrored(data: ProblemView, settings: RunSettings, state: SearchState, limit: float,
                     deadline: float | None = None,
                     stall: tuple[float, float] | None = None) -> BackendResult | None:
    """The best mirror-image schedule found within `limit`; it becomes the hint of the
    whole model, or the answer where none follows. None when the problem has no mirror symmetry.
    `wall_time` is the share of the limit spent (the work measure when deterministic).
    With `stall` (F&B pairs; seconds, earliest), a search that goes that many seconds without
    a better schedule, once `earliest` seconds have passed, stops and pair window search takes
    the rest of the limit (`pair_window`).
    The starting schedule hints it even when that is not its own mirror image and so no
    solution of it (the list scheduler's, on DualPipe's placement): measured, that beat
    both no hint and a list scheduler that builds only mirror images."""
    twin = mirror.twins(data)
    if twin is None:
        return None
    model, start, pairs = mirrored_model(data, state, twin)
    solver = _solver(data, settings, limit, deadline)
    solver.parameters.use_lns_only = len(data.ops) > mirror.SEARCH_ONLY_ABOVE_OPS
    # With F&B pairs that LNS varies its parameters (measured: see mirror.SEARCH_ONLY_ABOVE_OPS).
    solver.parameters.diversify_lns_params = solver.parameters.use_lns_only and data.pair_duration is not None
    progress = _Progress(data, settings, state, start, pairs, bounds=False)
    stalled = _Stall(progress, *stall) if stall is not None and pairs is not None else None
    code = _run(state, solver, model, progress, stalled)
    spent = _spent(settings, solver)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return BackendResult("unknown", None, None, None, spent)
    starts = {op: solver.Value(var) for op, var in start.items()}
    chosen = pairs.chosen(solver) if pairs is not None else []
    value, note = int(solver.ObjectiveValue()), _clock_note(settings, state, solver, limit, "mirror-image search")
    if stalled is not None and stalled.stalled and limit - spent >= 1.0 and not state.stop.is_set():
        began = time.monotonic()
        starts, chosen, value, found = _pair_windows(data, settings, state, (model, start, pairs),
                                                     (starts, chosen, value),
                                                     limit - spent, progress.t0)
        note = joined_notes(f"mirror-image search stopped after {spent:.1f} s, {stall[0]:.1f} s without a "
                            "better schedule", found)
        spent += time.monotonic() - began
    state.hint, state.hint_pairs = starts, set(chosen)
    return BackendResult("feasible", starts, value, None, spent, pairs=chosen, message=note)


def mirrored_model(data: ProblemView, state: SearchState, twin: dict):
    """The hinted model with every op starting with its mirror image `twin[op]` (and pairs
    only within reach, `mirror.pairs_within`): (model, start variables, pairs)."""
    model, start, pairs = _hinted_model(data, state, mirror.pairs_within(data))
    mirror.add_mirror(model, start, pairs.literal if pairs else {}, twin)
    return model, start, pairs


def _pair_windows(data: ProblemView, settings: RunSettings, state: SearchState, mirrored: tuple, schedule: tuple,
                  seconds: float, t0: float):
    """Pair window search on the mirrored model (model, start variables, pairs) from its
    schedule (starts, pairs, value): the best schedule the same way, and a note."""
    starts, chosen, value = schedule

    def better(found: dict, found_value: int, found_pairs: set) -> None:
        state.best_found = (found, found_value, sorted(found_pairs))  # for a solve left behind at its limit
        if settings.progress:
            settings.progress(data.value(found_value), data.value(state.lower_bound()), time.monotonic() - t0)

    packed, paired, packed_value, steps, improved = pair_window.search(data, settings, state, *mirrored, starts, chosen,
                                                                       seconds,
                                                                       better)
    if packed_value is not None and packed_value <= value:
        starts, chosen, value = packed, sorted(paired), packed_value
    return starts, chosen, value, f"pair window search: {improved} improvement(s) in {steps} step(s)"


def _hinted_model(data: ProblemView, state: SearchState, pairs_within: int | None = None):
    """The model with the starting schedule (if any) as a complete hint: the model, its
    start variables and its pairs (see `build_model` for `pairs_within`)."""
    model, start, _, pairs, derived = build_model(data, state, pairs_within=pairs_within)
    if state.hint:
        add_hint(model, data, state, start, derived)
        if pairs is not None:
            pairs.hint(model, state.hint_pairs)
    return model, start, pairs


def _run(state: SearchState, solver: cp_model.CpSolver, model: cp_model.CpModel, callback,
         give_up: Callable[[], bool] | None = None) -> int:
    """Solve, stopping soon after Ctrl-C, or once `give_up()` says so; CP-SAT's status code."""
    stopper = _watch_stop(state, solver, give_up)
    try:
        return solver.Solve(model, callback)
    finally:
        stopper.set()


class _Stall:
    """A `give_up` for `_run`: true, and `stalled` from then on, once `seconds` pass after
    the search's latest solution (or its start) and `earliest` seconds after its start."""

    def __init__(self, progress: _Progress, seconds: float, earliest: float) -> None:
        self.progress, self.seconds = progress, seconds
        self.not_before = time.monotonic() + earliest
        self.stalled = False

    def __call__(self) -> bool:
        now = time.monotonic()
        self.stalled = self.stalled or (now - self.progress.last_gain > self.seconds and now >= self.not_before)
        return self.stalled


def _watch_stop(state: SearchState, solver: cp_model.CpSolver, give_up: Callable[[], bool] | None = None):
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
