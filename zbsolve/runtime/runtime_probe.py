"""The pipeline runtime's own time (docs/runtime.md, "The runtime's own time"): a stack's
profile times its ops alone, a run also spends time between them (sends and receives posted,
Python between actions) and waits for a neighbour's activation. The probe runs a ZB-H1 plan
of the stack with torch.distributed.pipelining on two CPU ranks and keeps only those two
times; its ops' own times are left to the profile. It runs the stack itself, not an empty
stage: the runtime's time between ops grows with the work around it.
"""

from __future__ import annotations

import statistics

from zbsolve.baselines import run_baseline
from zbsolve.errors import UsageError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost

from .execute import run_plan
from .measured import measured_run
from .profiling import LayerShape

PROBE_RANKS, PROBE_MICROBATCHES = 2, 8


def probe_runtime(shape: LayerShape, steps: int = 10, warmup: int = 3) -> dict:
    """The median gap before an op whose inputs were there (`op_overhead`, ms) and the median
    wait for a neighbour's activation beyond it (`comm`, ms), activations of `shape`'s size."""
    problem = build_problem(PROBE_RANKS, PROBE_MICROBATCHES, StageCost(1.0, 1.0, 1.0))
    plan = run_baseline("zb-h1", problem)  # B and W apart, as torch runs a zero-bubble plan
    run = measured_run(plan, run_plan(plan, shape, steps, warmup))
    if not run.overheads or not run.waits:
        raise UsageError("the runtime probe saw no gap or no wait to measure")  # a 2-rank ZB-H1 has both
    overhead = statistics.median(run.overheads)
    return {"op_overhead": overhead, "comm": max(0.0, statistics.median(run.waits) - overhead),
            "ranks": PROBE_RANKS, "microbatches": PROBE_MICROBATCHES, "steps": steps,
            "gaps": len(run.overheads), "waits": len(run.waits)}
