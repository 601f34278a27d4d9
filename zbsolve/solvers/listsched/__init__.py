"""A fast, memory-aware list scheduler (any placement, any costs, F&B pairs).

It builds schedules op by op: the device that can start something earliest starts the
op its priority rule prefers among those ready then. Several rules, in-flight caps and
two ways of holding memory are tried and the best schedule is returned. It is the warm
start of the exact solvers and the answer for instances too large to model. Its status
is `feasible`; only a matching lower bound makes it `optimal` (decided by
`zbsolve.solvers.solve`).
"""

from __future__ import annotations

import time

from zbsolve.solvers.base import BackendResult, SolveInput

from .rules import RULES, Rule
from .run import ListRun, layout

# In-flight microbatches a device admits, as a multiple of the stages from it to the end
# of the pipe (1F1B holds that many; ZB-H2 about twice); None: memory is the only cap.
CAPS = (1.0, 1.5, 2.0, None)
# Tried after those: below 1F1B's count, which shortens each microbatch's stay where memory
# is so tight that lifetimes, not idle time, set the pace (1.5B V-shape at 0.5x: 1773.15 ms
# at cap 1.0, 1702.10 at 0.75).
TIGHT_CAPS = (0.5, 0.75)


def solve_list(data: SolveInput) -> BackendResult:
    t0 = time.monotonic()
    best: ListRun | None = None
    shared = layout(data)
    tried = 0
    admissions = (True, False) if any(shared.spare) and data.memory_limit is not None else (True,)
    passes = [(r, c, w) for caps in (CAPS, TIGHT_CAPS) for r in RULES for c in caps for w in admissions]
    for rule, cap, whole in passes:
        if data.stop.is_set() or (best is not None and time.monotonic() - t0 > data.time_limit):
            break
        run = ListRun(data, shared, rule, cap, whole)
        tried += 1
        if run.complete and (best is None or run.objective() < best.objective()):
            best = run
            if data.progress:
                data.progress(data.value(run.objective()), None, time.monotonic() - t0)
    wall = time.monotonic() - t0
    if best is None:
        return BackendResult("unknown", None, None, None, wall, message="every list-scheduling rule deadlocked",
                             interrupted=data.stop.is_set())
    return BackendResult(
        "feasible", best.starts, best.objective(), None, wall, pairs=best.pairs,
        message=f"list scheduler, best of {tried} pass(es): {best.rule.name}, cap {best.cap}"
                + ("" if best.whole else ", per-stage memory"),
        interrupted=data.stop.is_set(),
    )


__all__ = ["solve_list", "Rule", "RULES", "CAPS", "TIGHT_CAPS"]
