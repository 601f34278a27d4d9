"""Where a search starts: the best hand-made schedule within the memory limit, or the list
scheduler's when that is shorter, given to the backend as a complete hint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from zbsolve.baselines import applicable, run_baseline
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.problem import Problem
from zbsolve.schedule.schedule import Schedule

from . import registry
from .retiming import retimed
from .settings import RunSettings
from .state import SearchState
from .view import ProblemView

# A short solve's list scheduler gets at least this long, up to half the limit: with only a
# tenth of a short limit it ran too few of its passes (docs/solving.md, "Starting schedules").
LIST_LEAST_S = 1.0


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


def starter_schedule(graph: OpGraph, data: ProblemView, settings: RunSettings, state: SearchState) -> Schedule | None:
    """A starting schedule from the backend that makes them (the list scheduler, when installed), given a
    tenth of the time limit, and at least LIST_LEAST_S up to half of it. One whose order
    breaks the memory limit is dropped: zero-length ops that tie on one device may run in an
    order the scheduler's own count did not see."""
    starter = registry.starter()
    if starter is None:
        return None
    share = max(0.1 * settings.limit, min(LIST_LEAST_S, 0.5 * settings.limit))
    result = starter.run(data, replace(settings, limit=share, progress=None), state)
    if result.starts is None:
        return None
    schedule = retimed(graph, data, result, starter.name)
    return None if schedule.over_memory_limit() else schedule


def lever_hint(schedule: Schedule, data: ProblemView) -> dict[Op, int]:
    """Start times of a schedule with levers in solver units: its FC's and R's as they are
    (the lever models read them), a fused BW as B then W back to back where the model splits."""
    graph = data.lever_graph or data.graph
    hint: dict[Op, int] = {}
    for ops in schedule.devices:
        for t in ops:
            start = graph.ticks(t.start) // data.unit
            if t.op.kind == "BW" and data.split:
                b = t.op.with_kind("B")
                hint[b], hint[t.op.with_kind("W")] = start, start + data.duration[b]
            else:
                hint[t.op] = start
    return hint


def hint_from(schedule: Schedule, data: ProblemView) -> tuple[dict[Op, int], set[tuple[Op, Op]]]:
    """Start times of a schedule in solver units, and its overlapped pairs.

    A fused BW becomes B then W back to back, or B with its W absorbed when paired.
    """
    graph, unit = data.graph, data.unit
    split = data.split
    hint: dict[Op, int] = {}
    pairs: set[tuple[Op, Op]] = set()
    starts = {t.op: graph.ticks(t.start) // unit for ops in schedule.devices for t in ops}
    for slots in schedule.order():
        for slot in slots:
            if len(slot) == 2:
                f, b = sorted(slot, key=lambda op: op.kind != "F")
                b = b.with_kind("B") if split else b
                pairs.add((f, b))
    paired = {b for _, b in pairs}
    for op, start in starts.items():
        if op.kind == "BW" and split:
            b = op.with_kind("B")
            hint[b] = start
            w_start = start + (data.pair_length if b in paired else data.duration[b])
            hint[b.with_kind("W")] = w_start
        else:
            hint[op] = start
    if set(hint) != set(data.ops):
        return {}, set()
    return hint, pairs
