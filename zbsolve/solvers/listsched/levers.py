"""The list scheduler with the recompute lever (docs/solving.md, "Memory levers"): its passes
run on the problem without levers at the memory limit and at looser ones (LOOSER whole
activations more per device), and each order found is recomputed just enough to fit the
real limit (`recompute_fit`: where a level would pass it, the microbatch held whole whose
backward comes last). The fastest that fits is its answer. A looser limit lets more
microbatches in flight, which recomputation then pays for in compute."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from zbsolve.problem.op_graph import OpGraph
from zbsolve.schedule.schedule import Schedule
from zbsolve.schedule.simulator import simulate
from zbsolve.solvers.recompute_fit import fitted_with_recomputation
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.retiming import device_orders
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView, build_view

LOOSER = (0, 1, 2, 4)  # whole activations per device added to the limit the passes keep


def solve_list_levers(data: ProblemView, settings: RunSettings, state: SearchState,
                      solve_list: Callable[[ProblemView, RunSettings, SearchState], BackendResult]) -> BackendResult:
    """`solve_list`: the plain passes (the list backend's own solve)."""
    t0 = time.monotonic()
    graph = data.lever_graph
    assert graph is not None
    plain = replace(graph.problem, levers=())
    share = replace(settings, limit=settings.limit / len(LOOSER), progress=None)
    activation = max(c.activation for c in plain.stage_costs)
    best: Schedule | None = None
    tried = []
    for more in LOOSER if plain.memory_limit is not None else (0,):
        if state.stop.is_set():
            break
        looser = plain if plain.memory_limit is None else replace(
            plain, memory_limit=tuple(limit + more * activation for limit in plain.memory_limit))
        view = build_view(OpGraph(looser), data.split, data.objective)
        result = solve_list(view, share, SearchState(view))
        if result.starts is None:
            continue
        timed = simulate(graph, device_orders(result, view), "list")  # timed once, on the problem's own limit
        found = fitted_with_recomputation(graph, timed) if timed.over_memory_limit() else timed
        tried.append(more)
        if found is not None and (best is None or found.value < best.value):
            best = found
            if settings.progress:
                settings.progress(best.value, None, time.monotonic() - t0)
    wall = time.monotonic() - t0
    if best is None:
        return BackendResult(Status.UNKNOWN, None, None, None, wall, interrupted=state.stop.is_set(),
                             message="no list-scheduled order fits, even recomputed")
    starts = {t.op: graph.ticks(t.start) // data.unit for ops in best.devices for t in ops}
    return BackendResult(Status.FEASIBLE, starts, graph.ticks(best.metrics.makespan) // data.unit, None, wall,
                         interrupted=state.stop.is_set(),
                         message=f"list scheduler at {len(tried)} looser limit(s), recomputed to fit: "
                                 f"{best.recomputed()} microbatch-stages recomputed")
