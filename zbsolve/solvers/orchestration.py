"""A solve from problem to validated schedule (docs/solving.md): checks, starting schedules,
bounds, the backend, re-timing, validation, and an honest status."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import replace

from zbsolve.baselines import applicable, run_baseline
from zbsolve.errors import InfeasibleError, SolverError, UsageError
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.problem import Problem
from zbsolve.problem.size import check_size
from zbsolve.schedule.schedule import Schedule, SolverInfo
from zbsolve.schedule.simulator import simulate
from zbsolve.schedule.validator import validate

from . import (
    backends,  # noqa: F401  (each registers itself)
    registry,
)
from .bounds import lower_bound as static_bound
from .fewest_levers import with_fewest_levers
from .recompute_fit import fitted_with_recomputation
from .result import BackendResult, Status, joined_notes
from .retiming import retimed
from .runner import run_in_thread
from .settings import Progress, RunSettings, check_run_options, runs_deterministic
from .state import SearchState
from .view import build_view
from .warm_start import best_fitting_baseline, hint_from, lever_hint, starter_schedule

MIN_BACKEND_S = 1.0  # the backend's least time, however long the starting schedules took
LEVERS_PLAIN_SHARE = 0.3  # of a lever solve's limit: the solve without levers that starts it
START_MEETS_BOUND = "the starting schedule meets the lower bound"  # no backend ran


def check_solver_options(solver: str, time_limit: float, workers: int, deterministic: bool | None = None,
                         seed: int = 0) -> None:
    registry.get(solver)
    check_run_options(time_limit, workers, deterministic, seed)


def minimum_memory(problem: Problem) -> list[float]:
    """Smallest limit per device that admits any schedule: one microbatch's activation of
    the pipe that leaves the most on that device (running microbatches one at a time,
    whole, needs exactly this)."""
    return [max(pipe) for pipe in zip(*(problem.activation_per_device(q) for q in range(len(problem.pipes))))]


def check_memory_feasible(problem: Problem) -> None:
    if problem.memory_limit is None:
        return
    need = minimum_memory(problem)
    for d, (limit, minimum) in enumerate(zip(problem.memory_limit, need)):
        if limit < minimum * (1 - 1e-12):
            raise InfeasibleError(
                f"memory limit {limit:g} on device {d} is below what one microbatch needs there "
                f"({minimum:g}); the smallest limit that works is {problem.memory_text(max(need))}"
            )


def lower_bound(problem: Problem, graph: OpGraph | None = None) -> float:
    """A proven lower bound on the problem's objective, in its time unit (see `bounds`)."""
    graph = graph or OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    return data.value(static_bound(data))


def with_bound(schedule: Schedule, bound: float) -> Schedule:
    """The schedule with `bound` and its gap to it recorded (for hand-made schedules)."""
    value = schedule.value
    gap = (value - bound) / value if value else 0.0
    return schedule.with_solver(replace(schedule.solver, bound=bound, gap=max(0.0, gap)))


def check_solvable(problem: Problem, solver: str) -> None:
    """What `solve` refuses before any work (a backend that cannot model the problem, a model
    too large, a memory limit below one microbatch), for a caller that works before it."""
    _backend_for(problem, solver)


def _backend_for(problem: Problem, solver: str) -> tuple[registry.Backend, str | None]:
    check_size(problem)
    backend, note = registry.backend_for(problem, solver)
    check_memory_feasible(problem)
    return backend, note


def solve(
    problem: Problem,
    solver: str | None = None,
    *,
    time_limit: float = 60.0,
    workers: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    warm_start: bool = True,
    stop=None,
    deterministic: bool | None = None,
    baselines: Sequence[Schedule] | None = None,
) -> Schedule:
    """Find a schedule for `problem`; status `optimal` only when the backend proved it.

    `deterministic` (the default with one worker) limits the search by work measures instead
    of the clock, so that a run repeats exactly on any machine; the wall time can then be
    several times `time_limit`. Raises InfeasibleError when the problem has no schedule and
    SolverError when nothing was found in time. `stop` (a threading.Event) ends the search early.
    `baselines`: the problem's hand-made schedules when the caller has timed them already (a
    table shows them too); the best within the memory limit is a starting schedule.
    """
    began = time.monotonic()
    solver = registry.default_name() if solver is None else solver
    workers = workers if workers is not None else max(1, min(8, os.cpu_count() or 1))
    check_solver_options(solver, time_limit, workers, deterministic, seed)
    if baselines is not None and any(b.problem != problem for b in baselines):
        raise UsageError("baselines must be hand-made schedules of the problem being solved")
    backend, fallback = _backend_for(problem, solver)
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    progress = _timed_from(began, progress)
    settings = RunSettings(limit=time_limit, workers=workers, seed=seed, progress=progress,
                           deterministic=runs_deterministic(workers, deterministic))
    state = SearchState(data)
    if stop is not None:
        state.stop = stop
    if problem.levers and warm_start and baselines is None:  # timed once: both starts below read them
        baselines = [run_baseline(name, problem, graph) for name in applicable(problem)]
    warm = best_fitting_baseline(problem, graph, baselines) if warm_start else None
    if problem.levers and warm_start:
        assert baselines is not None
        if "recompute" in problem.levers:
            warm = _best_recomputed_to_fit(graph, baselines, warm)
        warm = _without_levers(problem, graph, backend.name, settings, stop, warm)
    bound = data.value(state.lower_bound())
    # With F&B pairs a hand-made schedule that fits starts CP-SAT even where the list scheduler
    # finds a shorter one: the pair searches did better from it (docs/solving.md).
    paired_start = problem.fb_overlap is not None and warm is not None
    if warm_start and not backend.makes_starts and not paired_start and not _meets(warm, bound):
        found = starter_schedule(graph, data, settings, state)
        if found is not None and (warm is None or found.value < warm.value):
            warm = found
    if progress:  # the search may take a while to report: say where it starts from
        progress(warm.value if warm is not None else None, bound, 0.0)
    if _meets(warm, bound):
        # Nothing can beat it: skip the model (building a large one takes longer than this).
        proven = BackendResult(Status.OPTIMAL, None, None, None, 0.0,
                               message=START_MEETS_BOUND)
        return _finish(problem, graph, data, settings, state, backend.name, _noted(proven, fallback), warm, began)
    if state.stop.is_set() and warm is not None:  # interrupted during the start: no model to build
        stopped = BackendResult(Status.FEASIBLE, None, None, None, 0.0, interrupted=True,
                                message="interrupted before the search began")
        return _finish(problem, graph, data, settings, state, backend.name, _noted(stopped, fallback), warm, began)
    if warm is not None:
        hint, state.hint_pairs = hint_from(warm, data) if not problem.levers else (lever_hint(warm, data), set())
        state.hint = hint or None
        # Only a better schedule is of use: the starting one bounds the objective.
        state.take_incumbent(-(-graph.ticks(warm.value) // data.unit))
    budget = settings
    if not settings.deterministic:  # the limit covers the whole solve, starting schedules included
        budget = replace(settings, limit=max(MIN_BACKEND_S, time_limit - (time.monotonic() - began)))
    elif problem.levers and warm_start:  # the work units the solve without levers left
        budget = replace(settings, limit=max(MIN_BACKEND_S, settings.limit * (1 - LEVERS_PLAIN_SHARE)))
    # A backend with no work measure is held to the clock even when deterministic.
    clocked = not settings.deterministic or not backend.work_limited
    result = run_in_thread(backend.run, data, budget, state, clocked)
    return _finish(problem, graph, data, settings, state, backend.name, _noted(result, fallback), warm, began)


def _best_recomputed_to_fit(graph: OpGraph, baselines: Sequence[Schedule],
                            warm: Schedule | None) -> Schedule | None:
    """The better of `warm` and each hand-made schedule over the limit with the
    recomputations it needs to fit (`recompute_fit`)."""
    for schedule in baselines:
        fitted = fitted_with_recomputation(graph, schedule)
        if fitted is not None and (warm is None or fitted.value < warm.value):
            warm = fitted
    return warm


def _without_levers(problem: Problem, graph: OpGraph, solver: str, settings: RunSettings, stop,
                    warm: Schedule | None) -> Schedule | None:
    """The problem solved without its levers for LEVERS_PLAIN_SHARE of the limit: its schedule
    is one of the levers' too, so the lever model starts no worse than the plain solve
    (docs/solving.md, "Memory levers"). Returns the better start."""
    try:
        plain = solve(replace(problem, levers=()), solver, time_limit=LEVERS_PLAIN_SHARE * settings.limit,
                      workers=settings.workers, seed=settings.seed, stop=stop,
                      deterministic=settings.deterministic)
    except (InfeasibleError, SolverError):  # no schedule without levers (or none found): the levers may fit
        return warm
    found = simulate(graph, plain.order(), "solved without levers")
    return found if warm is None or found.value < warm.value else warm


def _timed_from(began: float, progress: Progress | None) -> Progress | None:
    """`progress` with every report's time counted from `began`, the solve's start: each
    backend counts from its own start, after the starting schedules."""
    if progress is None:
        return None
    return lambda best, bound, _elapsed: progress(best, bound, time.monotonic() - began)


def _meets(schedule: Schedule | None, bound: float) -> bool:
    return schedule is not None and schedule.value <= bound * (1 + 1e-12)


def _noted(result: BackendResult, note: str | None) -> BackendResult:
    result.message = joined_notes(note, result.message)
    return result


def _finish(problem, graph, data, settings: RunSettings, state: SearchState, solver: str, result: BackendResult,
            warm: Schedule | None, began: float) -> Schedule:
    # The whole solve's time, as its limit counts it. The clock is the one thing a repeated
    # single-worker run cannot reproduce: leave it out.
    wall = None if settings.deterministic else round(time.monotonic() - began, 3)
    info = SolverInfo(solver, result.status.value, wall_time_s=wall,
                      time_limit_s=settings.limit, message=result.message)
    if result.status == Status.INFEASIBLE:
        raise InfeasibleError(f"{solver} proved that no schedule fits the memory limit "
                              f"{_limit_text(problem)}")
    if result.starts is None:  # interrupted, proven by the bound, or nothing found in time
        within = settings.limit_text(registry.get(solver).work_limited)
        if warm is None:
            reason = (
                "interrupted before" if result.interrupted
                else f"no schedule found within {within} by"
            )
            raise SolverError(f"{reason} {solver}; try a longer --time-limit or a looser --memory")
        if result.status == Status.UNKNOWN and not result.interrupted:
            # The model found nothing in time (very large instances): the starting schedule
            # is still a validated answer, just not an improved or proven one.
            why = "" if result.message else f"{solver} found no schedule within {within}: "
            result = replace(result, status=Status.FEASIBLE, message=joined_notes(
                result.message, f"{why}the starting schedule ({warm.name}) is returned"))
            info = replace(info, message=result.message)
        schedule = warm
    else:
        schedule = retimed(graph, data, result, "solved")
    if warm is not None and warm.value < schedule.value:
        schedule = warm  # the backend stopped early with something worse than the warm start
        info = replace(info, message=joined_notes(info.message, f"the starting schedule ({warm.name}) is shorter"
                                                                " and is returned"))
    if problem.levers:
        schedule = with_fewest_levers(graph, schedule)
    validate(schedule)
    value = schedule.value
    bound = data.value(state.lower_bound())
    if result.bound is not None:  # the model's times are whole units: round the bound up
        bound = max(bound, data.value(math.ceil(result.bound - 1e-6)))
    bound = min(bound, value)
    # the schedule's status (schedule.STATUSES): the backend's, or that the search was interrupted
    status = "interrupted" if result.interrupted else result.status.value
    if status != "optimal" and math.isclose(bound, value, rel_tol=1e-12):
        status = "optimal"  # the value meets a proven lower bound
        info = replace(info, message=info.message or "optimality proven by the lower bound")
    elif status == "optimal" and not math.isclose(bound, value, rel_tol=1e-12):
        status = "feasible"
    gap = (value - bound) / value if value else 0.0
    info = replace(info, status=status, objective=value, bound=bound, gap=gap)
    return replace(schedule, name="solved", solver=info)


def _limit_text(problem: Problem) -> str:
    if problem.memory_limit is None:
        return "(none set)"
    return problem.memory_text(max(problem.memory_limit))
