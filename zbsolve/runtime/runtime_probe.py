"""The pipeline runtime's own time (docs/runtime.md, "The runtime's own time"): a stack's
profile times its ops alone, a run also spends time between them (sends and receives posted,
Python between actions) and waits for a neighbour's output, and on a CPU its ops run slower
than alone, its communication threads sharing the cores. The probe runs a ZB-H1 plan of the
stack with torch.distributed.pipelining on two CPU ranks and measures all three. It runs the
stack itself, not an empty stage: the runtime's time between ops grows with the work around it.
"""

from __future__ import annotations

import statistics

from zbsolve.baselines import run_baseline
from zbsolve.errors import UsageError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import cost_fields

from .execute import run_plan
from .measured import measured_run
from .profiling import LayerShape

PROBE_RANKS, PROBE_MICROBATCHES = 2, 8


def probe_runtime(shape: LayerShape, costs: dict, first: dict | None, steps: int = 10, warmup: int = 3) -> dict:
    """Run a ZB-H1 plan of the stack, timed alone as `costs` (F, B, W, BW in ms) and `first`
    (the first stage's), and say what the runtime adds: the median gap before an op whose
    inputs were there (`op_overhead`, ms), the median wait for a neighbour's output beyond
    it (`comm`, ms) and, per kind, the ops' time in the run over their time alone (`factors`;
    on a CPU the ranks' communication threads share the cores the ops run on)."""
    record = StageCost(costs["F"], costs["B"], costs["W"], fused=costs.get("BW"))
    first_stage = None if first is None else cost_fields(first, "the first stage", partial=True)
    problem = build_problem(PROBE_RANKS, PROBE_MICROBATCHES, record, first_stage=first_stage)
    plan = run_baseline("zb-h1", problem)  # B and W apart, as torch runs a zero-bubble plan
    run = measured_run(plan, run_plan(plan, shape, steps, warmup))
    if not run.overheads or not run.waits:
        raise UsageError("the runtime probe saw no gap or no wait to measure")  # a 2-rank ZB-H1 has both
    # a fused backward does B's and W's work
    factors = {kind: run.ratio(*(("B", "W") if kind == "BW" else (kind,))) for kind in ("F", "B", "W", "BW")}
    overhead = statistics.median(run.overheads)
    return {"op_overhead": overhead, "comm": max(0.0, statistics.median(run.waits) - overhead), "factors": factors,
            "ranks": PROBE_RANKS, "microbatches": PROBE_MICROBATCHES, "steps": steps,
            "gaps": len(run.overheads), "waits": len(run.waits)}

