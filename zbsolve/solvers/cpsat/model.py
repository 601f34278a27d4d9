"""CP-SAT model (DESIGN §7): build it, solve it, read the start times back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection

from ortools.sat.python import cp_model

from zbsolve.solvers.base import BackendResult, SolveInput, joined_notes

from . import mirror, pair_window, relaxed, window
from .counted import add_counted_memory, planned
from .hints import Derived, add_hint
from .memory import add_memory
from .pairs import Pairs, occupancy

# Without the LP relaxation (level 0) larger models searched better in 60 s, 2 workers:
# V-shape 0.5x 1626.16 and 1638.77 ms against 1683.52 and 1642.35 (1.5B), 2585.64 against
# 2606.99 (6.2B), 14.6B 1.25x span 1639.42 against 1641.88; no instance above 1,000 ops did
# worse (benchmarks/parameters.md). Small models keep it: their proofs may need its bound.
LP_FREE_FROM_OPS = 1000
# Where the mirror-image search with F&B pairs is the answer, it hands the rest of the limit
# to pair window search after this share of the limit without a better schedule, but not
# before the second share has passed (`pair_window`). 60 s, 2 workers, 1.5B with pairs at
# 1.125x: 13 of 15 runs ended at 1041.66-1042.89 ms, where the LNS alone mostly stopped at
# 1049.15-1050.37; a fixed last 30% cost 14.6B most (1420.75-1427.65 ms over seeds 0-3,
# against 1418.03-1423.21), and stops before half the limit gave its two worst runs
# (benchmarks/parameters_pairs/pair-window.md).
PAIR_WINDOW_STALL = 0.15
PAIR_WINDOW_NOT_BEFORE = 0.5
WINDOW_SHARE = 0.5  # of the limit left to the window search, where it runs (see `window`)
WINDOW_FROM_OPS = 1000  # measured on 1,152 to 9,216 ops
# Presolve probing's work limit with F&B pairs (CP-SAT's default is 1.0). Its work measure
# undercounts there: on 14.6B costs on DualPipe's placement with pairs (2,304 ops) one unit
# took 14.6 s and 22 s of wall time in the mirrored model, and 14.7 s (0.62 units) in the whole
# one, so a 60 s solve found nothing better than DualPipe's 1446.94 ms (seeds 0, 1) and ran
# past its limit. At 0.1: 1434.08 and 1432.49 ms; 1.5B with pairs (576 ops) stays within its
# spread (1049.03, 1057.28, 1041.08 against 1056.39, 1048.87, 1041.22, seeds 0-2).
PAIR_PROBING_WORK = 0.1

# Small models where the bound phase runs get a short search of the whole model first. One
# worker (deterministic), 30 units: 1.5B V-shape 0.5x P=4 M=4 and M=6 (96 and 144 ops) were
# proven by the whole model in 0.35 and 1.5 s, after the bound phase had spent 14 s raising
# nothing; with this search first, in 0.55 and 1.55 s. Up to 400 ops, the sizes that must be
# proven: on the four 576-op benchmark instances where it would run (2 workers, 60 s, seed 0)
# it proved nothing within its share and the schedules moved both ways (1.5B 1.25x 1239.04
# against 1236.63 ms; DualPipe's placement at 1x, 1.5B 1167.33 against 1173.96, 6.2B
# 2030.63 against 1993.85; 6.2B 1.25x proven either way).
PROBE_SHARE = 0.05  # of the limit
PROBE_UP_TO_OPS = 400

MIRRORED_BEST = "best schedule from the mirror-image search"  # never proven: see `mirror`
# A deterministic (one-worker) solve is limited by CP-SAT's work measure; the clock stops it
# anyway at this many times its limit, plus CLOCK_SLACK_S, counted over the whole backend. The
# measure undercounts badly in some models: on 1.5B costs with F&B pairs (576 ops), one
# worker, the LNS-only mirrored phase counted 0.72 units in 24.4 s, so a 60 s solve ran
# 383 s when each phase had its own 4x backstop.
CLOCK_BACKSTOP = 4.0
CLOCK_SLACK_S = 10.0

STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.UNKNOWN: "unknown",
    cp_model.MODEL_INVALID: "unknown",
}


def build_model(data: SolveInput, counted_memory: bool | None = None, one_at_a_time: Collection[int] | None = None,
                pairs_within: int | None = None):
    """The model, its start variables, objective and pairs, and how every other variable
    follows from a hinted schedule. `counted_memory` forces the limit's counted form on or
    off (see `counted`); by default models within its size get it. `one_at_a_time`: the
    devices that run one op (or pair) at a time, all by default; leaving some out relaxes
    the model (`benchmarks/one_device.py --whole`). `pairs_within` restricts the pairs to
    halves the hint starts that close (see `Pairs`): then the model is a restriction."""
    model = cp_model.CpModel()
    H = data.horizon
    start = {op: model.NewIntVar(data.head[op], H - data.tail[op], f"s{op}") for op in data.ops}
    derived: Derived = []
    pairs = Pairs(model, data, start, derived, within=pairs_within) if data.pair_duration is not None else None
    end, device_intervals = occupancy(model, data, start, pairs, derived)
    for op in data.ops:
        for pred, delay in data.predecessors[op]:
            model.Add(start[op] >= end[pred] + delay)
    for chain in data.chains:  # identical microbatches: take them in order
        if data.ordered(chain):
            for a, b in zip(chain, chain[1:]):
                model.Add(start[b] >= start[a] + data.shortest(a))
    for a, b, delay in data.implied:  # memory-implied order: redundant, but CP-SAT does not derive it
        if a.kind != b.kind:
            model.Add(start[b] >= end[a] + delay)
    for d, intervals in enumerate(device_intervals):
        if one_at_a_time is None or d in one_at_a_time:
            model.AddNoOverlap(intervals)
    if data.memory_limit is not None:
        add_memory(model, data, start, end, derived)
        terms = planned(data, counted_memory)
        if terms is not None:
            add_counted_memory(model, data, start, end, derived, terms)
    objective = _add_objective(model, data, start, end, derived)
    return model, start, objective, pairs, derived


def _add_objective(model, data: SolveInput, start, end, derived: Derived):
    H = data.horizon
    worst = H if data.incumbent is None else min(H, data.incumbent)
    if data.objective == "makespan":
        makespan = model.NewIntVar(data.lower_bound(), worst, "makespan")
        sinks = data.sinks()
        for op in sinks:
            model.Add(makespan >= end[op])
        derived.append((makespan, lambda h: max(h.end[op] for op in sinks)))
        model.Minimize(makespan)
        return makespan
    span = model.NewIntVar(data.lower_bound(), worst, "span")
    # The span does not change when a schedule moves in time, so only schedules whose earliest
    # op starts at 0 are searched (one stage-0 F per pipe may be it). Without this the bound
    # stayed at the static one: 1.5B V-shape at 0.75x, P=3 M=4, one worker, 20 units left
    # 245.534 ms against 225.516; with it the optimum is proven in under 4 s.
    model.AddMinEquality(0, [start[op] for op in data.starters])
    spans = []
    for d in range(len(data.device_ops)):
        first = model.NewIntVar(0, H, f"first{d}")
        last = model.NewIntVar(0, H, f"last{d}")
        firsts, lasts = data.first_forwards(d), data.last_backwards(d)
        for op in firsts:
            model.Add(first <= start[op])
        for op in lasts:
            model.Add(last >= end[op])
        model.Add(span >= last - first)
        derived.append((first, lambda h, ops=firsts: min(h.start[op] for op in ops)))
        derived.append((last, lambda h, ops=lasts: max(h.end[op] for op in ops)))
        spans.append((firsts, lasts))
    derived.append((span, lambda h: max(max(h.end[op] for op in lasts) - min(h.start[op] for op in firsts)
                                        for firsts, lasts in spans)))
    model.Minimize(span)
    return span


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, data: SolveInput, start: dict, pairs: Pairs | None, bounds: bool = True,
                 t0: float | None = None) -> None:
        super().__init__()
        self.data, self.start, self.pairs = data, start, pairs
        self.bounds = bounds  # False for a restricted model: its bound says nothing of the problem,
        # so the problem's own lower bound is shown instead
        self.t0 = time.monotonic() if t0 is None else t0  # the whole solve's, across its phases
        self.last_gain = time.monotonic()  # when the latest solution came (or the search began)

    def on_solution_callback(self) -> None:
        self.last_gain = time.monotonic()
        if self.data.stop.is_set():
            self.StopSearch()
        # Kept for a solve that must leave the search behind at its time limit.
        chosen = [pair for pair, x in self.pairs.literal.items() if self.BooleanValue(x)] if self.pairs else []
        self.data.best_found = ({op: self.Value(var) for op, var in self.start.items()},
                                int(self.ObjectiveValue()), chosen)
        if self.data.progress:
            bound = self.BestObjectiveBound() if self.bounds else self.data.lower_bound()
            self.data.progress(self.data.value(self.ObjectiveValue()), self.data.value(bound),
                               time.monotonic() - self.t0)


def solve_cpsat(data: SolveInput) -> BackendResult:
    """The whole model, then (large models without pairs, wall-clock limits) window search
    from its best schedule for the rest of the limit. Otherwise, on a mirror-symmetric
    problem, mirror-image schedules are searched first and hint the whole model (from
    `mirror.ALONE_FROM_OPS` ops with F&B pairs they are the answer, searched among the pairs
    near the starting schedule's, `mirror.pairs_within`). Before all that, where
    the device relaxations' bound phase runs, a short search of the whole model (small
    models, `_probe`), then the phase (`_raise_bound`)."""
    t0 = time.monotonic()
    deadline = _clock_deadline(data.time_limit)  # binds deterministic solves only
    windows = not data.deterministic and data.pair_duration is None and len(data.ops) >= WINDOW_FROM_OPS
    limit = data.time_limit * (1 - WINDOW_SHARE if windows else 1)
    # Where window search runs, a mirrored phase did not help (14.6B on DualPipe's placement at
    # 1x, 2,304 ops, 60 s: 1642.28 ms without it; 1649.36 with it first, 1654.57 in the model's half).
    alone = data.pair_duration is not None and len(data.ops) >= mirror.ALONE_FROM_OPS
    small = len(data.ops) <= PROBE_UP_TO_OPS and relaxed.eligible(data)
    probed, probing = _probe(data, t0, deadline) if small else (None, 0.0)
    if probed is not None and (probed.status == "optimal" or data.stop.is_set()):
        probed.interrupted = probed.status != "optimal"
        probed.wall_time = time.monotonic() - t0
        return probed
    raised, note, spent = _raise_bound(data, t0, deadline)
    spent += probing
    if raised is not None and data.incumbent is not None and raised >= data.incumbent:
        return BackendResult("optimal", None, None, raised, time.monotonic() - t0, message=joined_notes(
            note, "the starting schedule meets it"))
    limit = max(1.0, limit - spent)
    # Where the mirrored phase is the answer, pair window search takes over when it stalls (on
    # the clock, for the makespan).
    stall = None
    if alone and not data.deterministic and data.objective == "makespan":
        stall = (limit * PAIR_WINDOW_STALL, limit * PAIR_WINDOW_NOT_BEFORE)
    mirrored = None if windows else _search_mirrored(
        data, limit * (1.0 if alone else mirror.MIRROR_SHARE), deadline, stall=stall)
    if mirrored is not None and mirrored.starts is not None:
        if mirrored.objective <= data.lower_bound():  # proven by the problem's own bound
            mirrored.status, mirrored.message = "optimal", "the mirror-image schedule meets the lower bound"
        elif alone:
            mirrored.message = joined_notes(MIRRORED_BEST, mirrored.message)
        if data.stop.is_set() or mirrored.status == "optimal" or alone:
            mirrored.interrupted = data.stop.is_set() and mirrored.status != "optimal"
            mirrored.wall_time = time.monotonic() - t0
            mirrored.bound, mirrored.message = raised, joined_notes(note, mirrored.message)
            return mirrored
    if mirrored is not None:  # the whole model keeps at least a moment to take the hint
        limit = max(1.0, limit - mirrored.wall_time)
    model, start, pairs = _hinted_model(data)
    solver = _solver(data, limit, deadline)
    if data.progress:
        solver.best_bound_callback = lambda bound: data.progress(
            None, data.value(bound), time.monotonic() - t0
        )
    code = _run(data, solver, model, _Progress(data, start, pairs, t0=t0))
    status = STATUS[code]
    starts, value, bound, chosen = None, None, None, []
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = {op: solver.Value(var) for op, var in start.items()}
        value = int(solver.ObjectiveValue())
        bound = solver.BestObjectiveBound()
        chosen = pairs.chosen(solver) if pairs is not None else []
    message = joined_notes(mirrored.message if mirrored else None, _clock_note(
        data, solver, limit, "search of the whole model" if mirrored else "search"))
    if mirrored is not None and mirrored.starts is not None and (value is None or mirrored.objective < value):
        # What the mirrored model proved holds only among mirror images: never `optimal`.
        starts, value, chosen, status = mirrored.starts, mirrored.objective, mirrored.pairs, "feasible"
        message = joined_notes(MIRRORED_BEST, message)
    left = data.time_limit - (time.monotonic() - t0)
    origin = starts or data.hint
    if windows and code != cp_model.OPTIMAL and origin and not data.stop.is_set() and left > 1.0:
        def better(found: dict, found_value: int) -> None:
            data.best_found = (found, found_value, [])
            if data.progress:
                data.progress(data.value(found_value), data.value(bound), time.monotonic() - t0)

        found, steps, improved = window.search(data, origin, left, better)
        message = f"window search: {improved} improvement(s) in {steps} step(s)"
        if improved:
            starts, value, status = found, data.objective_of(found), "feasible"
    if starts is None and probed is not None:  # what follows the short search looks only for better
        starts, value, status, chosen = probed.starts, probed.objective, "feasible", probed.pairs
    interrupted = data.stop.is_set() and status != "optimal"
    if raised is not None:
        bound = raised if bound is None else max(bound, raised)
    return BackendResult(
        status=status, starts=starts, objective=value, bound=bound, message=joined_notes(note, message),
        wall_time=time.monotonic() - t0, interrupted=interrupted, pairs=chosen,
    )


def _probe(data: SolveInput, t0: float, deadline: float) -> tuple[BackendResult | None, float]:
    """A short search of the whole model before the bound phase: small models are often
    proven within it. Its result (proven, or a schedule better than the starting one, which
    then hints what follows) or None, and the share of the limit it spent."""
    model, start, pairs = _hinted_model(data)
    solver = _solver(data, PROBE_SHARE * data.time_limit, deadline)
    code = _run(data, solver, model, _Progress(data, start, pairs, t0=t0))
    spent = _spent(data, solver)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, spent
    starts, value = {op: solver.Value(var) for op, var in start.items()}, int(solver.ObjectiveValue())
    chosen = pairs.chosen(solver) if pairs is not None else []  # none today: `relaxed.eligible` has no pairs
    if code == cp_model.OPTIMAL:
        return BackendResult("optimal", starts, value, value, spent, pairs=chosen,
                             message="proven by a short search of the whole model"), spent
    data.raise_bound(int(solver.BestObjectiveBound()))
    if data.incumbent is None or value < data.incumbent:
        data.hint, data.hint_pairs = starts, set(chosen)
        data.take_incumbent(value)
    return BackendResult("feasible", starts, value, None, spent, pairs=chosen), spent


def _raise_bound(data: SolveInput, t0: float, deadline: float) -> tuple[int | None, str | None, float]:
    """The device relaxations' bound phase (see `relaxed`) where it applies: the bound it
    proved in solver units (also raised in `data`, so the whole model starts from it) or
    None, a note saying so, and the share of the limit it spent."""
    if not relaxed.eligible(data):
        return None, None, 0.0

    def ask(model: cp_model.CpModel, limit: float) -> tuple[int, float]:
        solver = _limited(data, limit, deadline)
        code = _run(data, solver, model, None)
        return code, _spent(data, solver)

    def progress(proven: int) -> None:
        if data.progress:
            data.progress(None, data.value(proven), time.monotonic() - t0)

    proven, device, spent = relaxed.raise_bound(data, relaxed.SHARE * data.time_limit, ask, progress)
    if proven is None:
        return None, None, spent
    data.raise_bound(proven)
    return proven, f"bound from device {device}'s relaxation with the memory limit", spent


def _solver(data: SolveInput, limit: float, deadline: float | None = None) -> cp_model.CpSolver:
    """A solver for the whole model (or a restriction of it) with the limit (seconds, or
    CP-SAT's work measure when deterministic, then stopped by the clock at `deadline` at the
    latest) and the settings measured on such models."""
    solver = _limited(data, limit, deadline)
    if len(data.ops) >= LP_FREE_FROM_OPS:
        solver.parameters.linearization_level = 0
    if data.pair_duration is not None:
        solver.parameters.probing_deterministic_time_limit = PAIR_PROBING_WORK
    return solver


def _limited(data: SolveInput, limit: float, deadline: float | None = None) -> cp_model.CpSolver:
    """A solver with CP-SAT's defaults, `data`'s workers and seed, and the limit."""
    solver = cp_model.CpSolver()
    if data.deterministic:
        # A wall-clock limit cuts a single-threaded search at a point that depends on the
        # machine's load; deterministic time (CP-SAT's work measure, 1 unit took 1-3 s on
        # the dev machine without F&B pairs) cuts it at the same point every run.
        solver.parameters.max_deterministic_time = float(limit)
        deadline = _clock_deadline(limit) if deadline is None else deadline
        solver.parameters.max_time_in_seconds = max(1.0, deadline - time.monotonic())
    else:
        solver.parameters.max_time_in_seconds = float(limit)
    solver.parameters.num_workers = int(data.workers)
    solver.parameters.random_seed = int(data.seed)
    solver.parameters.catch_sigint_signal = False  # zbsolve's own handler sets data.stop
    return solver


def _spent(data: SolveInput, solver: cp_model.CpSolver) -> float:
    """What a finished search used of its limit: work units when deterministic, else seconds."""
    return solver.ResponseProto().deterministic_time if data.deterministic else solver.WallTime()


def _clock_deadline(limit: float) -> float:
    return time.monotonic() + CLOCK_BACKSTOP * limit + CLOCK_SLACK_S


def _clock_note(data: SolveInput, solver: cp_model.CpSolver, limit: float, search: str) -> str | None:
    """Says so when the clock, not the work limit, ended a deterministic search: then the
    result depends on the machine's speed and may not repeat."""
    if not data.deterministic or data.stop.is_set():
        return None
    response = solver.ResponseProto()
    # Nothing else ends an unproven search early: CP-SAT stops a little before its clock limit
    # (0.95 s of 1 s seen), so the wall time cannot tell.
    if response.status in (cp_model.OPTIMAL, cp_model.INFEASIBLE) or response.deterministic_time >= 0.99 * limit:
        return None
    return (f"the clock stopped the deterministic {search} after {response.wall_time:.0f} s, at "
            f"{response.deterministic_time:.2f} of its {limit:.3g} work units: it may not repeat exactly")


def _search_mirrored(data: SolveInput, limit: float, deadline: float | None = None,
                     stall: tuple[float, float] | None = None) -> BackendResult | None:
    """The best mirror-image schedule found within `limit`; it becomes the hint of the
    whole model, or the answer where none follows. None when the problem has no mirror symmetry.
    `wall_time` is the share of the limit spent (the work measure when deterministic).
    With `stall` (F&B pairs; seconds, earliest), a search that goes that many seconds without
    a better schedule, once `earliest` seconds have passed, stops and pair window search takes
    the rest of the limit (`pair_window`).
    The starting schedule hints it even when that is not its own mirror image and so no
    solution of it (the list scheduler's, on DualPipe's placement): on 6.2B at 1x without
    pairs (60 s, seeds 0-3) such solves ended at 1992.27-1992.79 ms, against 2005.63-2129.37
    unhinted and 1992.27-2002.47 from a list scheduler that built only mirror images
    (tried 2026-11-27, reverted)."""
    twin = mirror.twins(data)
    if twin is None:
        return None
    model, start, pairs = mirrored_model(data, twin)
    solver = _solver(data, limit, deadline)
    solver.parameters.use_lns_only = len(data.ops) > mirror.SEARCH_ONLY_ABOVE_OPS
    # With F&B pairs that LNS varies its parameters (measured: see mirror.SEARCH_ONLY_ABOVE_OPS).
    solver.parameters.diversify_lns_params = solver.parameters.use_lns_only and data.pair_duration is not None
    progress = _Progress(data, start, pairs, bounds=False)
    stalled = _Stall(progress, *stall) if stall is not None and pairs is not None else None
    code = _run(data, solver, model, progress, stalled)
    spent = _spent(data, solver)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return BackendResult("unknown", None, None, None, spent)
    starts = {op: solver.Value(var) for op, var in start.items()}
    chosen = pairs.chosen(solver) if pairs is not None else []
    value, note = int(solver.ObjectiveValue()), _clock_note(data, solver, limit, "mirror-image search")
    if stalled is not None and stalled.stalled and limit - spent >= 1.0 and not data.stop.is_set():
        began = time.monotonic()
        starts, chosen, value, found = _pair_windows(data, (model, start, pairs), (starts, chosen, value),
                                                     limit - spent, progress.t0)
        note = joined_notes(f"mirror-image search stopped after {spent:.1f} s, {stall[0]:.1f} s without a "
                            "better schedule", found)
        spent += time.monotonic() - began
    data.hint, data.hint_pairs = starts, set(chosen)
    return BackendResult("feasible", starts, value, None, spent, pairs=chosen, message=note)


def mirrored_model(data: SolveInput, twin: dict):
    """The hinted model with every op starting with its mirror image `twin[op]` (and pairs
    only within reach, `mirror.pairs_within`): (model, start variables, pairs)."""
    model, start, pairs = _hinted_model(data, mirror.pairs_within(data))
    mirror.add_mirror(model, start, pairs.literal if pairs else {}, twin)
    return model, start, pairs


def _pair_windows(data: SolveInput, mirrored: tuple, schedule: tuple, seconds: float, t0: float):
    """Pair window search on the mirrored model (model, start variables, pairs) from its
    schedule (starts, pairs, value): the best schedule the same way, and a note."""
    starts, chosen, value = schedule

    def better(found: dict, found_value: int, found_pairs: set) -> None:
        data.best_found = (found, found_value, sorted(found_pairs))  # for a solve left behind at its limit
        if data.progress:
            data.progress(data.value(found_value), data.value(data.lower_bound()), time.monotonic() - t0)

    packed, paired, packed_value, steps, improved = pair_window.search(data, *mirrored, starts, chosen, seconds,
                                                                       better)
    if packed_value is not None and packed_value <= value:
        starts, chosen, value = packed, sorted(paired), packed_value
    return starts, chosen, value, f"pair window search: {improved} improvement(s) in {steps} step(s)"


def _hinted_model(data: SolveInput, pairs_within: int | None = None):
    """The model with the starting schedule (if any) as a complete hint: the model, its
    start variables and its pairs (see `build_model` for `pairs_within`)."""
    model, start, _, pairs, derived = build_model(data, pairs_within=pairs_within)
    if data.hint:
        add_hint(model, data, start, derived)
        if pairs is not None:
            pairs.hint(model, data.hint_pairs)
    return model, start, pairs


def _run(data: SolveInput, solver: cp_model.CpSolver, model: cp_model.CpModel, callback,
         give_up: Callable[[], bool] | None = None) -> int:
    """Solve, stopping soon after Ctrl-C, or once `give_up()` says so; CP-SAT's status code."""
    stopper = _watch_stop(data, solver, give_up)
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


def _watch_stop(data: SolveInput, solver: cp_model.CpSolver, give_up: Callable[[], bool] | None = None):
    """Stop the search soon after `data.stop` is set (Ctrl-C) or `give_up()` is true, even
    between solutions."""
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(0.2):
            if data.stop.is_set() or (give_up is not None and give_up()):
                solver.StopSearch()
                return

    threading.Thread(target=watch, daemon=True).start()
    return finished
