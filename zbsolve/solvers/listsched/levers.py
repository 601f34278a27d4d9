"""The list scheduler with memory levers (docs/solving.md, "Memory levers"): its passes run
on the problem without levers at the memory limit and at looser ones (LOOSER whole
activations more per device), and each order found is recomputed just enough to fit the
real limit (`recompute_fit`: where a level would pass it, the microbatch held whole whose
backward comes last) or offloaded just enough (`offload_fit`: copies beside compute, the
times kept), as the problem's levers allow. The fastest that fits is its answer. A looser
limit lets more microbatches in flight, which recomputation pays for in compute and
offload in copies."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate
from zbsolve.solvers.offload_fit import fitted_with_offload
from zbsolve.solvers.recompute_fit import fitted_with_recomputation
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.retiming import device_orders
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView, build_view

LOOSER = (0, 1, 2, 4)  # whole activations per device added to the limit the passes keep
SHARES = (0.75, 0.5, 0.25)  # of each activation that may go to host, with offload (see `_counted_at`)


def solve_list_levers(data: ProblemView, settings: RunSettings, state: SearchState,
                      solve_list: Callable[[ProblemView, RunSettings, SearchState], BackendResult]) -> BackendResult:
    """`solve_list`: the plain passes (the list backend's own solve)."""
    t0 = time.monotonic()
    graph = data.lever_graph
    assert graph is not None
    plain = replace(graph.problem, levers=())
    problems = _looser(plain, "offload" in graph.problem.levers)
    share = replace(settings, limit=settings.limit / len(problems), progress=None)
    best: Schedule | None = None
    tried = []
    for looser in problems:
        if state.stop.is_set():
            break
        view = build_view(OpGraph(looser), data.split, data.objective)
        result = solve_list(view, share, SearchState(view))
        if result.starts is None:
            continue
        timed = simulate(graph, device_orders(result, view), "list")  # timed once, on the problem's own limit
        tried.append(looser)
        for found in _fitted(graph, timed):
            if best is None or found.value < best.value:
                best = found
            if settings.progress:
                settings.progress(best.value, None, time.monotonic() - t0)
    wall = time.monotonic() - t0
    if best is None:
        return BackendResult(Status.UNKNOWN, None, None, None, wall, interrupted=state.stop.is_set(),
                             message="no list-scheduled order fits, even with levers")
    starts = {t.op: graph.ticks(t.start) // data.unit for ops in best.devices for t in ops}
    return BackendResult(Status.FEASIBLE, starts, graph.ticks(best.metrics.makespan) // data.unit, None, wall,
                         interrupted=state.stop.is_set(),
                         message=f"list scheduler on {len(tried)} looser problem(s), fitted with levers: "
                                 f"{best.recomputed()} microbatch-stages recomputed, {best.offloaded()} offloaded")


def _looser(plain: Problem, offload: bool) -> list[Problem]:
    """The problems the passes run on: the problem without levers at its limit and LOOSER
    activations more on every device; with offload also `_counted_at` each of SHARES."""
    if plain.memory_limit is None:
        return [plain]
    activation = max(c.activation for c in plain.stage_costs)
    found = [replace(plain, memory_limit=tuple(limit + more * activation for limit in plain.memory_limit))
             for more in LOOSER]
    return found + ([_counted_at(plain, share) for share in SHARES] if offload else [])


def _counted_at(plain: Problem, share: float) -> Problem:
    """`plain` with each activation that has room to go to host counted at `share` of its
    size while in flight (an offloaded one is off the device for most of its stay), the
    residual it keeps from backward to weight gradient in full (no copy frees that). Room:
    the forwards and backwards of the stages after it take at least its two copies (so the
    last stage's, whose backward follows its forward at once, count in full)."""
    costs = list(plain.stage_costs)
    index: dict[tuple[int, float], int] = {}
    pipes = []
    for pipe in plain.pipes:
        stages = []
        for k, stage in enumerate(pipe.stages):
            cost = costs[stage.cost]
            trip = sum(costs[later.cost].F + costs[later.cost].B for later in pipe.stages[k + 1:])
            if cost.offload is None or trip < 2 * cost.offload:
                stages.append(stage)
                continue
            if (stage.cost, share) not in index:
                held = max(cost.residual, share * cost.activation)
                index[stage.cost, share] = len(costs)
                costs.append(replace(cost, activation=held, checkpoint=min(cost.checkpoint, held)))
            stages.append(replace(stage, cost=index[stage.cost, share]))
        pipes.append(replace(pipe, stages=tuple(stages)))
    return replace(plain, stage_costs=tuple(costs), pipes=tuple(pipes))


def _fitted(graph: OpGraph, timed: Schedule) -> list[Schedule]:
    """`timed` where it fits; else its order recomputed and offloaded to fit, as allowed."""
    if not timed.over_memory_limit():
        return [timed]
    levers = graph.problem.levers
    found = [fitted_with_recomputation(graph, timed) if "recompute" in levers else None,
             fitted_with_offload(graph, timed) if "offload" in levers else None]
    return [schedule for schedule in found if schedule is not None]
