"""Solve a problem with an integer program (DESIGN §7) and return a validated schedule.

The backend's per-device order is re-timed by the simulator with the exact costs, checked
by the independent validator, and compared with the best hand-made schedule that fits
the memory limit, which also serves as the warm start.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from zbsolve.baselines import applicable, run_baseline
from zbsolve.errors import InfeasibleError, SolverError, UsageError, ZbsolveError
from zbsolve.limits import MAX_MODEL_OPS, check_model_size, check_size, model_size
from zbsolve.ops import Op, OpGraph
from zbsolve.problem import Problem
from zbsolve.schedule import Schedule, SolverInfo
from zbsolve.simulator import simulate
from zbsolve.validate import validate

from .base import BackendResult, Progress, SolveInput, build_input, joined_notes, partners, runs_deterministic

SOLVERS = ("cpsat", "cbc", "list")
# Backends that a deterministic solve limits by a work measure; any other (CBC) keeps to the clock.
WORK_LIMITED = ("cpsat", "list")
# A short solve's list scheduler gets at least this long (half the limit at most): with a
# tenth of 2 s it ran 42 of its 192 passes on a 192-op V-shape at 0.5x, and CP-SAT ended at
# 537.47 ms where the list scheduler alone gives 522.52.
LIST_LEAST_S = 1.0
MIN_BACKEND_S = 1.0  # the backend's least time, however long the starting schedules took
OVERRUN_GRACE_S = 3.0  # how long past its time limit a backend may run before it is left behind


def _backend(name: str):
    if name == "cpsat":
        from .cpsat import solve_cpsat

        return solve_cpsat
    if name == "list":
        from .listsched import solve_list

        return solve_list
    from .cbc import solve_cbc

    return solve_cbc


MAX_SEED = 2**31 - 1  # CP-SAT's random_seed is a 32-bit integer


def check_solver_options(solver: str, time_limit: float, workers: int, deterministic: bool | None = None,
                         seed: int = 0) -> None:
    if solver not in SOLVERS:
        raise UsageError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) or time_limit <= 0:
        raise UsageError(f"time limit must be a positive number of seconds, got {time_limit!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise UsageError(f"workers must be an integer >= 1, got {workers!r}")
    if deterministic and workers != 1:
        raise UsageError(f"a deterministic solve needs one worker (several race), got workers={workers}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise UsageError(f"seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")


def minimum_memory(problem: Problem) -> list[float]:
    """Smallest limit per device that admits any schedule: one microbatch's activation of
    the pipe that leaves the most on that device (running microbatches one at a time,
    whole, needs exactly this)."""
    need = [0.0] * problem.devices
    for pipe in problem.pipes:
        per_device = [0.0] * problem.devices
        for stage in pipe.stages:
            per_device[stage.device] += problem.stage_costs[stage.cost].activation
        need = [max(a, b) for a, b in zip(need, per_device)]
    return need


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


def best_fitting_baseline(problem: Problem, graph: OpGraph,
                          timed: Sequence[Schedule] | None = None) -> Schedule | None:
    """The hand-made schedule with the best objective among those within the memory limit;
    `timed`: the problem's hand-made schedules when already timed (else they are timed here)."""
    best = None
    schedules = timed if timed is not None else (run_baseline(name, problem, graph) for name in applicable(problem))
    for schedule in schedules:
        if schedule.over_memory_limit():
            continue
        if best is None or schedule.value < best.value:
            best = schedule
    return best


def lower_bound(problem: Problem, graph: OpGraph | None = None) -> float:
    """A proven lower bound on the problem's objective, in its time unit (see `bounds`)."""
    graph = graph or OpGraph(problem)
    data = build_input(graph, problem.split_backward, problem.objective)
    return data.value(data.lower_bound())


def with_bound(schedule: Schedule, bound: float) -> Schedule:
    """The schedule with `bound` and its gap to it recorded (for hand-made schedules)."""
    value = schedule.value
    gap = (value - bound) / value if value else 0.0
    return schedule.with_solver(replace(schedule.solver, bound=bound, gap=max(0.0, gap)))


def _hint_from(schedule: Schedule, data: SolveInput) -> tuple[dict[Op, int], set[tuple[Op, Op]]]:
    """Start times of a schedule in solver units, and its overlapped pairs.

    A fused BW becomes B then W back to back, or B with its W absorbed when paired.
    """
    graph, unit = data.graph, data.unit
    hint: dict[Op, int] = {}
    pairs: set[tuple[Op, Op]] = set()
    starts = {t.op: graph.ticks(t.start) // unit for ops in schedule.devices for t in ops}
    for slots in schedule.order():
        for slot in slots:
            if len(slot) == 2:
                f, b = sorted(slot, key=lambda op: op.kind != "F")
                b = b.with_kind("B") if data.split else b
                pairs.add((f, b))
    paired = {b for _, b in pairs}
    for op, start in starts.items():
        if op.kind == "BW" and data.split:
            b = op.with_kind("B")
            hint[b] = start
            w_start = start + (data.pair_duration if b in paired else data.duration[b])
            hint[b.with_kind("W")] = w_start
        else:
            hint[op] = start
    if set(hint) != set(data.ops):
        return {}, set()
    return hint, pairs


def retimed(graph: OpGraph, data: SolveInput, result: BackendResult, name: str) -> Schedule:
    """A backend's schedule re-timed with exact costs, in its order: no op starts later.
    For span, each device's first op stays where the backend put it (starting it earlier
    could only lengthen that device's span)."""
    orders = _orders_from(result, data)
    release = None
    if data.objective == "span":
        release = {slots[0][0]: result.starts[slots[0][0]] * data.unit for slots in orders if slots}
    return simulate(graph, orders, name, release=release)


def _orders_from(result: BackendResult, data: SolveInput) -> list[list[tuple[Op, ...]]]:
    """Per-device slots in start order; a pair becomes one (F, B or BW) slot, and a split
    backward whose W the pair absorbed runs as the fused BW."""
    partner = partners(result.pairs)
    absorbed = {b.with_kind("W") for _, b in result.pairs}

    def execution_order(op: Op) -> tuple[int, int, bool, int]:
        # At one start time an op of no length (a W of cost 0) runs first: after a longer op
        # it would start, and free its memory, only when that op ends. Among ops of no length
        # at one instant, those that free memory run before forwards, as the models count
        # them (no dependency runs the other way there: no forward has length 0).
        length = data.pair_duration if op in partner else data.duration[op]
        return result.starts[op], result.starts[op] + length, op.kind == "F", data.rank[op]

    orders = []
    for ops in data.device_ops:
        slots = []
        for op in sorted(ops, key=execution_order):
            if op in absorbed or (op in partner and op.kind != "F"):
                continue
            if op in partner:
                b = partner[op]
                slots.append((op, b.with_kind("BW")))
            else:
                slots.append((op,))
        orders.append(slots)
    return orders


def solve(
    problem: Problem,
    solver: str = "cpsat",
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
    workers = workers if workers is not None else max(1, min(8, os.cpu_count() or 1))
    check_solver_options(solver, time_limit, workers, deterministic, seed)
    if baselines is not None and any(b.problem != problem for b in baselines):
        raise UsageError("baselines must be hand-made schedules of the problem being solved")
    solver, fallback = _backend_for(problem, solver)
    graph = OpGraph(problem)
    data = build_input(graph, problem.split_backward, problem.objective)
    progress = _timed_from(began, progress)
    data.time_limit, data.workers, data.seed, data.progress = time_limit, workers, seed, progress
    data.deterministic = runs_deterministic(workers, deterministic)
    if stop is not None:
        data.stop = stop
    warm = best_fitting_baseline(problem, graph, baselines) if warm_start else None
    bound = data.value(data.lower_bound())
    # With F&B pairs a hand-made schedule that fits starts CP-SAT even where the list scheduler
    # finds a shorter one. 60 s solves (2 workers, seeds 0-3) from the list scheduler's
    # 1438.10 ms on 14.6B with pairs found nothing shorter (its schedule is not its own mirror
    # image); from the same schedule built as one, they ended at 1429.15-1432.36 ms, and from
    # DualPipe's 1446.94 at 1412.66-1418.68. On 1.5B (list 1069.36, built as a mirror image;
    # DualPipe 1092.69) they ended at 1050.56-1059.57 against 1048.40-1049.76.
    paired_start = problem.fb_overlap is not None and warm is not None
    if warm_start and solver != "list" and not paired_start and not _meets(warm, bound):
        found = _list_schedule(graph, data)
        if found is not None and (warm is None or found.value < warm.value):
            warm = found
    if progress:  # the search may take a while to report: say where it starts from
        progress(warm.value if warm is not None else None, bound, 0.0)
    if _meets(warm, bound):
        # Nothing can beat it: skip the model (building a large one takes longer than this).
        proven = BackendResult("optimal", None, None, None, 0.0,
                               message="the starting schedule meets the lower bound")
        return _finish(problem, graph, data, solver, _noted(proven, fallback), warm, began)
    if warm is not None:
        hint, data.hint_pairs = _hint_from(warm, data)
        data.hint = hint or None
        # Only a better schedule is of use: the starting one bounds the objective.
        data.take_incumbent(-(-graph.ticks(warm.value) // data.unit))
    budget = data
    if not data.deterministic:  # the limit covers the whole solve, starting schedules included
        budget = replace(data, time_limit=max(MIN_BACKEND_S, time_limit - (time.monotonic() - began)))
    # A backend with no work measure is held to the clock even when deterministic: CBC ran
    # 47 s against a 30 s limit on a P=3 M=16 interleaved:3 model.
    clocked = not data.deterministic or solver not in WORK_LIMITED
    result = _run_in_thread(_backend(solver), budget, clocked)
    return _finish(problem, graph, data, solver, _noted(result, fallback), warm, began)


def check_solvable(problem: Problem, solver: str) -> None:
    """What `solve` refuses before any work (a backend that cannot model the problem, a model
    too large, a memory limit below one microbatch), for a caller that works before it."""
    _backend_for(problem, solver)


def _backend_for(problem: Problem, solver: str) -> tuple[str, str | None]:
    """The backend that runs, and why it is not the one asked for (cpsat above its size)."""
    if solver == "cbc" and problem.fb_overlap is not None:  # refuse before any work, whatever the instance
        raise UsageError("the cbc backend does not model F&B overlap (fb_overlap); use --solver cpsat")
    fallback = None
    if solver == "cpsat" and model_size(problem, solver) > MAX_MODEL_OPS:
        check_size(problem)
        fallback = (f"{model_size(problem, solver):,} ops are above the cpsat model limit of "
                    f"{MAX_MODEL_OPS:,}: answered by the list scheduler")
        solver = "list"
    elif solver != "list":
        check_model_size(problem, solver)
    check_memory_feasible(problem)
    return solver, fallback


def _timed_from(began: float, progress: Progress | None) -> Progress | None:
    """`progress` with every report's time counted from `began`, the solve's start: each
    backend counts from its own start, after the starting schedules (on 1.5B single at
    0.75x with a 30 s limit, its first report said 4.8 s at 6.4 s into the solve)."""
    if progress is None:
        return None
    return lambda best, bound, _elapsed: progress(best, bound, time.monotonic() - began)


def _meets(schedule: Schedule | None, bound: float) -> bool:
    return schedule is not None and schedule.value <= bound * (1 + 1e-12)


def _noted(result: BackendResult, note: str | None) -> BackendResult:
    result.message = joined_notes(note, result.message)
    return result


def _list_schedule(graph: OpGraph, data: SolveInput) -> Schedule | None:
    """A starting schedule from the list scheduler, given a tenth of the time limit, and
    at least LIST_LEAST_S up to half of it. One whose order breaks the memory limit is
    dropped: zero-length ops that tie on one device may run in an order the scheduler's
    own count did not see."""
    from .listsched import solve_list

    share = max(0.1 * data.time_limit, min(LIST_LEAST_S, 0.5 * data.time_limit))
    result = solve_list(replace(data, time_limit=share, progress=None))
    if result.starts is None:
        return None
    schedule = retimed(graph, data, result, "list")
    return None if schedule.over_memory_limit() else schedule


def _run_in_thread(backend, data: SolveInput, clocked: bool) -> BackendResult:
    """Run the backend off the main thread, so that Python's signal handlers (Ctrl-C,
    SIGTERM: they only run on the main thread) can set `data.stop` while it searches.

    CP-SAT checks its clock between propagation rounds, and on large memory-bound models
    one round took over 20 s, so a solve ran up to 35 s past its limit. A backend still
    running `OVERRUN_GRACE_S` after its limit is told to stop and left behind (a daemon
    thread); its best schedule so far, when it reported one, is the result. Not `clocked`:
    limited by work measures (deterministic CP-SAT, the list scheduler), never left behind.
    """
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["result"] = backend(data)
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    began = time.monotonic()
    worker = threading.Thread(target=work, name="zbsolve-solver", daemon=True)
    worker.start()
    overran = False
    while worker.is_alive():
        worker.join(timeout=0.1)
        if clocked and time.monotonic() - began > data.time_limit + OVERRUN_GRACE_S:
            overran = not data.stop.is_set()  # a user's interrupt is not an overrun
            data.stop.set()
            worker.join(timeout=0.5)
            if worker.is_alive():
                return _left_behind(data, time.monotonic() - began, interrupted=not overran)
            break
    if "error" in outcome:
        raise outcome["error"]
    result = outcome["result"]
    if overran:  # it stopped when told to: not the user's interrupt, and said so
        result = replace(result, interrupted=False, message=joined_notes(_late(data), result.message))
    return result


def _late(data: SolveInput) -> str:
    return f"the search did not stop within {OVERRUN_GRACE_S:g} s of its {data.time_limit:.3g} s limit"


def _left_behind(data: SolveInput, wall: float, interrupted: bool) -> BackendResult:
    late = _late(data)
    if data.best_found is None:
        return BackendResult("unknown", None, None, None, wall, message=late, interrupted=interrupted)
    starts, objective, pairs = data.best_found
    return BackendResult("feasible", starts, objective, None, wall, pairs=pairs, interrupted=interrupted,
                         message=f"{late}: its best schedule so far is returned")


def _finish(problem, graph, data, solver, result: BackendResult, warm: Schedule | None,
            began: float) -> Schedule:
    # The whole solve's time, as its limit counts it (the backend's own left out the starting
    # schedules and bounds: on 1.5B V-shape 0.5x with a 6 s limit it said 4.8 s of 6.2). The
    # clock is the one thing a repeated single-worker run cannot reproduce: leave it out.
    wall = None if data.deterministic else round(time.monotonic() - began, 3)
    info = SolverInfo(solver, result.status, wall_time_s=wall,
                      time_limit_s=data.time_limit, message=result.message)
    if result.status == "infeasible":
        raise InfeasibleError(f"{solver} proved that no schedule fits the memory limit "
                              f"{_limit_text(problem)}")
    if result.starts is None:  # interrupted, proven by the bound, or nothing found in time
        if warm is None:
            reason = (
                "interrupted before" if result.interrupted
                else f"no schedule found within {data.time_limit:g} s by"
            )
            raise SolverError(f"{reason} {solver}; try a longer --time-limit or a looser --memory")
        if result.status == "unknown" and not result.interrupted:
            # The model found nothing in time (very large instances): the starting schedule
            # is still a validated answer, just not an improved or proven one.
            why = "" if result.message else f"{solver} found no schedule within {data.time_limit:g} s: "
            result = replace(result, status="feasible", message=joined_notes(
                result.message, f"{why}the starting schedule ({warm.name}) is returned"))
            info = replace(info, message=result.message)
        schedule = warm
    else:
        schedule = retimed(graph, data, result, "solved")
    if warm is not None and warm.value < schedule.value:
        schedule = warm  # the backend stopped early with something worse than the warm start
        info = replace(info, message=joined_notes(info.message, f"the starting schedule ({warm.name}) is shorter"
                                                                " and is returned"))
    validate(schedule)
    value = schedule.value
    bound = data.value(data.lower_bound())
    if result.bound is not None:  # the model's times are whole units: round the bound up
        bound = max(bound, data.value(math.ceil(result.bound - 1e-6)))
    bound = min(bound, value)
    status = "interrupted" if result.interrupted else result.status
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


__all__ = ["SOLVERS", "solve", "lower_bound", "with_bound", "minimum_memory", "check_solver_options",
           "runs_deterministic", "ZbsolveError"]
