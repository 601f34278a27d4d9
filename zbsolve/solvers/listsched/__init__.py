"""A fast, memory-aware list scheduler (any placement, any costs, F&B pairs).

It builds schedules op by op: the device that can start something earliest starts the
op its priority rule prefers among those ready then. Several rules, in-flight caps, three
ways of holding memory (per device, per stage, across the pipe), paces and limits below
the problem's are tried and the best schedule is returned. It is the warm start of the
exact solvers and the answer for instances too large to model. Its status is `feasible`;
only a matching lower bound makes it `optimal` (decided by `zbsolve.solvers.solve`).
"""

from __future__ import annotations

import time
from itertools import zip_longest
from typing import Any

from zbsolve.solvers.registry import Backend, register
from zbsolve.solvers.result import BackendResult, Status
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import ProblemView

from .levers import solve_list_levers
from .rules import RULES, Rule
from .run import Layout, ListRun, layout

# In-flight microbatches a device admits, as a multiple of the stages from it to the end
# of the pipe (1F1B holds that many; ZB-H2 about twice); None: memory is the only cap.
CAPS = (1.0, 1.5, 2.0, None)
# Tried after those: below 1F1B's count, which shortens each microbatch's stay where memory
# is so tight that lifetimes, not idle time, set the pace.
TIGHT_CAPS = (0.5, 0.75)
# Under a memory limit, then: microbatch n enters the pipe no earlier than n x f x the
# busiest device's work per microbatch, for these f. Pacing beat every unpaced pass where
# memory is tightest for the placement and lost where it is looser; the best paced passes
# used these rules.
PACES = (1.1, 1.0, 1.2, 1.05, 1.15, 1.3, 1.025, 1.075, 1.125, 1.175, 1.25)  # coarse to fine
PACED_RULES = ("critical path", "forward first", "backward first")
# Paced passes also let the first two microbatches in at once (head 1): better on most
# tight instances, worse on some, so both are tried.
HEADS = (0, 1)
# Paced passes are also run under tighter limits: the problem's in whole microbatches, then
# this many fewer (see tighter_limits).
TIGHTER_STEPS = (0, 1)
# With one worker the search must not depend on the machine's speed: passes are then
# limited by ops placed, counted at about what one core places in a second.
OPS_PER_SECOND = 40_000


def solve_list(data: ProblemView, settings: RunSettings, state: SearchState) -> BackendResult:
    if data.lever_graph is not None:
        return solve_list_levers(data, settings, state, solve_list)
    t0 = time.monotonic()
    best: ListRun | None = None
    shared = layout(data)
    tried = 0
    limited = data.memory_limit is not None
    admissions = (True, False) if any(shared.spare) and limited else (True,)
    Pass = dict[str, Any]  # ListRun's keyword arguments
    passes: list[Pass] = [dict(rule=r, cap=c, whole=w) for caps in (CAPS, TIGHT_CAPS) for r in RULES for c in caps
                          for w in admissions]
    if limited:  # taken in turns with the others: when time runs short, both kinds have been tried
        one_stage = not any(shared.spare)  # else take memory per stage, no room kept
        paced: list[Pass] = [dict(rule=r, cap=None, whole=one_stage, room=one_stage,
                                  pace=round(f * shared.pace_unit), head=head)
                             for f in PACES for head in HEADS for r in RULES if r.name in PACED_RULES]
        passes = [p for pair in zip_longest(passes, paced) for p in pair if p is not None]
        passes += [dict(p, limit=level) for level in tighter_limits(data, shared) for p in paced]
    # Reserving memory across the whole pipe never deadlocks: first where other passes may
    # (crowded devices), else only where every other pass did.
    fallback: list[Pass] = [dict(rule=r, cap=None, across=True) for r in RULES] if limited else []
    if crowded(data, shared):
        passes, fallback = fallback + passes, []
    for i, options in enumerate(passes + fallback):
        if state.stop.is_set():
            break
        if best is not None and (_budget_spent(data, settings, tried, t0) or i >= len(passes)):
            break
        run = ListRun(data, shared, state.stop, **options)
        tried += 1
        if run.complete and (best is None or run.objective() < best.objective()):
            best = run
            if settings.progress:
                settings.progress(data.value(run.objective()), None, time.monotonic() - t0)
    wall = time.monotonic() - t0
    if best is None:
        return BackendResult(Status.UNKNOWN, None, None, None, wall, message="every list-scheduling rule deadlocked",
                             interrupted=state.stop.is_set())
    return BackendResult(
        Status.FEASIBLE, best.starts, best.objective(), None, wall, pairs=best.pairs,
        message=f"list scheduler, best of {tried} pass(es): {best.rule.name}, cap {best.cap}" + _holding(best, data),
        interrupted=state.stop.is_set(),
    )


def tighter_limits(data: ProblemView, shared: Layout) -> list[list[int]]:
    """Per-device limits below the problem's: its limit rounded down to whole microbatches
    on each device, then one microbatch fewer (never below what a microbatch of every pipe
    there needs). A schedule that holds less is still valid, and more room is not always
    used well: a pass may fill memory with microbatches that then wait on each other."""
    unit = [max(here.values()) for here in shared.device_reserves]
    floor = [sum(here.values()) for here in shared.device_reserves]
    levels: list[list[int]] = []
    for fewer in TIGHTER_STEPS:
        level = [min(limit, max(least, (limit // u - fewer) * u)) if u else limit  # u = 0: holds nothing
                 for limit, u, least in zip(data.limits, unit, floor)]
        if level != data.memory_limit and level not in levels:
            levels.append(level)
    return levels


def crowded(data: ProblemView, shared: Layout) -> bool:
    """Whether some device of several pipes cannot hold one microbatch of each at once
    (the room the whole-activation passes keep for other pipes does not fit there)."""
    if data.memory_limit is None:
        return False
    return any(len(here) > 1 and sum(here.values()) > limit
               for here, limit in zip(shared.device_reserves, data.memory_limit))


def _budget_spent(data: ProblemView, settings: RunSettings, tried: int, t0: float) -> bool:
    """Ops placed so far against the limit when deterministic, else the clock."""
    if settings.deterministic:
        return tried * len(data.ops) > settings.limit * OPS_PER_SECOND
    return time.monotonic() - t0 > settings.limit


def _holding(run: ListRun, data: ProblemView) -> str:
    text = "" if run.whole else ", per-stage memory" + ("" if run.room else " without room kept")
    if run.limit != data.memory_limit:
        text += ", held below the memory limit"
    if run.pace is None:
        return text
    text += f", a microbatch every {data.value(run.pace):g}"
    return text + (f" after the first {run.head + 1}" if run.head else "")


register(Backend(
    name="list", run=solve_list,
    summary="the memory-aware list scheduler alone (fast; status feasible unless a bound meets it)",
    work_limited=True, makes_starts=True,
))

__all__ = ["solve_list", "tighter_limits", "crowded", "layout", "Rule", "RULES", "CAPS", "TIGHT_CAPS", "PACES",
           "HEADS", "TIGHTER_STEPS"]
