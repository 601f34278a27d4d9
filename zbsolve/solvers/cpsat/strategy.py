"""The CP-SAT backend's strategy (docs/solving.md): which phases run on which models, in
what share of the limit, and what each hands to the next. Parameters are in `parameters`,
running one search in `search`, the model in `formulation`."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op
from zbsolve.solvers.result import BackendResult, Status, joined_notes
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from . import levers, mirror, pair_window, parameters, relaxed, search, window
from .formulation import build_model
from .hints import add_hint
from .pairs import Pairs

# Shares and thresholds chosen on the benchmark suite (docs/solving.md, section 5).
# Where the mirror-image search with F&B pairs is the answer, pair window search takes the
# rest of the limit once this share passes without a better schedule, but not before the
# second share (`pair_window`): the mirrored LNS tends to stop on plateaus.
PAIR_WINDOW_STALL = 0.15
PAIR_WINDOW_NOT_BEFORE = 0.5
WINDOW_SHARE = 0.5  # of the limit left to the window search, where it runs (see `window`)
WINDOW_FROM_OPS = 1000
# Small models where the bound phase runs get a short search of the whole model first: such
# models are often proven at once, before the bound phase would spend its share.
PROBE_SHARE = 0.05  # of the limit
PROBE_UP_TO_OPS = 400

MIRRORED_BEST = "best schedule from the mirror-image search"  # never proven: see `mirror`


def solve_cpsat(data: ProblemView, settings: RunSettings, state: SearchState) -> BackendResult:
    """The whole model, then (large models without pairs, wall-clock limits) window search
    from its best schedule for the rest of the limit. Otherwise, on a mirror-symmetric
    problem, mirror-image schedules are searched first and hint the whole model (from
    `mirror.ALONE_FROM_OPS` ops with F&B pairs they are the answer, searched among the pairs
    near the starting schedule's, `mirror.pairs_within`). Before all that, where
    the device relaxations' bound phase runs, a short search of the whole model (small
    models, `_probe`), then the phase (`_raise_bound`)."""
    if data.lever_graph is not None:  # a model of its own, searched whole (docs/solving.md, "Memory levers")
        return levers.solve_levers(data, settings, state)
    t0 = time.monotonic()
    deadline = parameters.clock_deadline(settings.limit, data.pair_duration is not None)  # deterministic only
    windows = not settings.deterministic and data.pair_duration is None and len(data.ops) >= WINDOW_FROM_OPS
    limit = settings.limit * (1 - WINDOW_SHARE if windows else 1)
    # Where window search runs, a mirrored phase did not help: window search takes its place.
    alone = data.pair_duration is not None and len(data.ops) >= mirror.ALONE_FROM_OPS
    small = len(data.ops) <= PROBE_UP_TO_OPS and relaxed.eligible(data, settings, state)
    probed, probing = _probe(data, settings, state, t0, deadline) if small else (None, 0.0)
    if probed is not None and (probed.status == Status.OPTIMAL or state.stop.is_set()):
        probed.interrupted = probed.status != Status.OPTIMAL
        probed.wall_time = time.monotonic() - t0
        return probed
    raised, note, spent = _raise_bound(data, settings, state, t0, deadline)
    spent += probing
    if raised is not None and state.incumbent is not None and raised >= state.incumbent:
        return BackendResult(Status.OPTIMAL, None, None, raised, time.monotonic() - t0, message=joined_notes(
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
        # proven by the problem's own bound
        if mirrored.objective is not None and mirrored.objective <= state.lower_bound():
            mirrored.status, mirrored.message = Status.OPTIMAL, "the mirror-image schedule meets the lower bound"
        elif alone:
            mirrored.message = joined_notes(MIRRORED_BEST, mirrored.message)
        if state.stop.is_set() or mirrored.status == Status.OPTIMAL or alone:
            mirrored.interrupted = state.stop.is_set() and mirrored.status != Status.OPTIMAL
            mirrored.wall_time = time.monotonic() - t0
            mirrored.bound, mirrored.message = raised, joined_notes(note, mirrored.message)
            return mirrored
    if mirrored is not None:  # the whole model keeps at least a moment to take the hint
        limit = max(1.0, limit - mirrored.wall_time)
    model, start, pairs = _hinted_model(data, state)
    solver = parameters.solver_for(data, settings, limit, deadline)
    report = settings.progress
    if report:
        solver.best_bound_callback = lambda bound: report(None, data.value(bound), time.monotonic() - t0)
    code = search.run(state, solver, model, search.Progress(data, settings, state, start, pairs, t0=t0))
    status = search.STATUS[code]
    starts, value, bound = None, None, None
    chosen: list[tuple[Op, Op]] = []
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = {op: solver.Value(var) for op, var in start.items()}
        value = int(solver.ObjectiveValue())
        bound = solver.BestObjectiveBound()
        chosen = pairs.chosen(solver) if pairs is not None else []
    searched = "search of the whole model" if mirrored else "search"
    message = joined_notes(mirrored.message if mirrored else None,
                           parameters.clock_note(settings, state, solver, limit, searched))
    if mirrored is not None and mirrored.starts is not None and mirrored.objective is not None \
            and (value is None or mirrored.objective < value):
        # What the mirrored model proved holds only among mirror images: never `optimal`.
        starts, value, chosen, status = mirrored.starts, mirrored.objective, mirrored.pairs, Status.FEASIBLE
        message = joined_notes(MIRRORED_BEST, message)
    left = settings.limit - (time.monotonic() - t0)
    origin = starts or state.hint
    if windows and code != cp_model.OPTIMAL and origin and not state.stop.is_set() and left > 1.0:
        def better(found: dict, found_value: int) -> None:
            state.best_found = (found, found_value, [])
            if settings.progress:
                settings.progress(data.value(found_value), data.value(bound), time.monotonic() - t0)

        found, steps, improved = window.search(data, settings, state, origin, left, better)
        message = f"window search: {improved} improvement(s) in {steps} step(s)"
        if improved:
            starts, value, status = found, data.objective_of(found), Status.FEASIBLE
    if starts is None and probed is not None:  # what follows the short search looks only for better
        starts, value, status, chosen = probed.starts, probed.objective, Status.FEASIBLE, probed.pairs
    interrupted = state.stop.is_set() and status != Status.OPTIMAL
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
    solver = parameters.solver_for(data, settings, PROBE_SHARE * settings.limit, deadline)
    code = search.run(state, solver, model, search.Progress(data, settings, state, start, pairs, t0=t0))
    spent = parameters.spent(settings, solver)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, spent
    starts, value = {op: solver.Value(var) for op, var in start.items()}, int(solver.ObjectiveValue())
    chosen = pairs.chosen(solver) if pairs is not None else []  # none today: `relaxed.eligible` has no pairs
    if code == cp_model.OPTIMAL:
        return BackendResult(Status.OPTIMAL, starts, value, value, spent, pairs=chosen,
                             message="proven by a short search of the whole model"), spent
    state.raise_bound(int(solver.BestObjectiveBound()))
    if state.incumbent is None or value < state.incumbent:
        state.hint, state.hint_pairs = starts, set(chosen)
        state.take_incumbent(value)
    return BackendResult(Status.FEASIBLE, starts, value, None, spent, pairs=chosen), spent


def _raise_bound(data: ProblemView, settings: RunSettings, state: SearchState, t0: float,
                 deadline: float) -> tuple[int | None, str | None, float]:
    """The device relaxations' bound phase (see `relaxed`) where it applies: the bound it
    proved in solver units (also raised in `data`, so the whole model starts from it) or
    None, a note saying so, and the share of the limit it spent."""
    if not relaxed.eligible(data, settings, state):
        return None, None, 0.0

    def ask(model: cp_model.CpModel, limit: float) -> tuple[cp_model.CpSolverStatus, float]:
        solver = parameters.limited(settings, limit, deadline)
        code = search.run(state, solver, model, None)
        return code, parameters.spent(settings, solver)

    def progress(proven: int) -> None:
        if settings.progress:
            settings.progress(None, data.value(proven), time.monotonic() - t0)

    proven, kept, spent = relaxed.raise_bound(data, state, relaxed.SHARE * settings.limit, ask, progress)
    if proven is None or kept is None:
        return None, None, spent
    state.raise_bound(proven)
    named = ("device " if len(kept) == 1 else "devices ") + ", ".join(map(str, kept))
    return proven, f"bound from the relaxation of {named} with the memory limit", spent


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
    solver = parameters.solver_for(data, settings, limit, deadline)
    solver.parameters.use_lns_only = len(data.ops) > mirror.SEARCH_ONLY_ABOVE_OPS
    # With F&B pairs that LNS varies its parameters (measured: see mirror.SEARCH_ONLY_ABOVE_OPS).
    solver.parameters.diversify_lns_params = solver.parameters.use_lns_only and data.pair_duration is not None
    progress = search.Progress(data, settings, state, start, pairs, bounds=False)
    stalled = search.Stall(progress, *stall) if stall is not None and pairs is not None else None
    code = search.run(state, solver, model, progress, stalled)
    spent = parameters.spent(settings, solver)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return BackendResult(Status.UNKNOWN, None, None, None, spent)
    starts = {op: solver.Value(var) for op, var in start.items()}
    chosen = pairs.chosen(solver) if pairs is not None else []
    value = int(solver.ObjectiveValue())
    note = parameters.clock_note(settings, state, solver, limit, "mirror-image search")
    if stall is not None and stalled is not None and stalled.stalled and limit - spent >= 1.0 \
            and not state.stop.is_set():
        began = time.monotonic()
        starts, chosen, value, found = _pair_windows(data, settings, state, (model, start, pairs),
                                                     (starts, chosen, value),
                                                     limit - spent, progress.t0)
        note = joined_notes(f"mirror-image search stopped after {spent:.1f} s, {stall[0]:.1f} s without a "
                            "better schedule", found)
        spent += time.monotonic() - began
    state.hint, state.hint_pairs = starts, set(chosen)
    return BackendResult(Status.FEASIBLE, starts, value, None, spent, pairs=chosen, message=note)


def mirrored_model(data: ProblemView, state: SearchState, twin: dict):
    """The hinted model with every op starting with its mirror image `twin[op]` (and pairs
    only within reach, `mirror.pairs_within`): (model, start variables, pairs)."""
    model, start, pairs = _hinted_model(data, state, mirror.pairs_within(data))
    mirror.add_mirror(model, start, pairs.literal if pairs else {}, twin)
    return model, start, pairs


def _pair_windows(data: ProblemView, settings: RunSettings, state: SearchState,
                  mirrored: tuple[cp_model.CpModel, dict, Pairs | None], schedule: tuple,
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


