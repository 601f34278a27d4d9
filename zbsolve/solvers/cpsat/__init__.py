"""OR-Tools CP-SAT backend: one interval per op, NoOverlap and cumulative memory per device."""

from __future__ import annotations

from zbsolve.problem.problem import Problem
from zbsolve.problem.size import forwards_per_stage, op_count
from zbsolve.solvers.registry import Backend, register

MAX_MODEL_SIZE = 200_000  # ops plus overlapped-pair choices


def model_size(problem: Problem) -> int:
    """Variables that grow with the problem: one per op, one per F and backward of another
    stage on the same device when F&B pairs may form."""
    size = op_count(problem)
    if problem.fb_overlap is not None:
        size += sum(f * (sum(held) - f) for held in forwards_per_stage(problem) for f in held)
    return size


def _refuses(problem: Problem) -> str | None:
    if problem.levers and problem.fb_overlap is not None:
        return "memory levers (--levers) with F&B overlap (--fb-overlap) are not modelled; leave one out"
    if problem.levers and problem.objective != "makespan":
        return "memory levers (--levers) are modelled for the makespan objective only"
    return None


def _run(data, settings, state):
    from .strategy import solve_cpsat

    return solve_cpsat(data, settings, state)


register(Backend(
    name="cpsat", run=_run, summary="OR-Tools CP-SAT: proofs, bounds and large-neighbourhood search",
    work_limited=True, size=model_size, size_limit=MAX_MODEL_SIZE, size_unit="ops and pair choices",
    above_limit="list", slow_work_with_pairs=True, refuses=_refuses,
))
