"""MILP backend: PuLP with its bundled CBC; disjunctive ordering binaries only where needed."""

from __future__ import annotations

from zbsolve.problem.problem import Problem
from zbsolve.problem.size import forwards_per_stage
from zbsolve.solvers.registry import Backend, register

MAX_ORDERING_PAIRS = 500_000  # one binary per pair of ops on a device, before pruning


def ordering_pairs(problem: Problem) -> int:
    kinds = (3 if problem.split_backward else 2) + (1 if problem.levers else 0)  # an R per forward
    return sum(kinds * sum(held) * (kinds * sum(held) - 1) // 2 for held in forwards_per_stage(problem))


def _refuses(problem: Problem) -> str | None:
    if problem.fb_overlap is not None:
        return "the cbc backend does not model F&B overlap (fb_overlap); use --solver cpsat"
    if problem.levers and problem.objective != "makespan":
        return "memory levers (--levers) are modelled for the makespan objective only"
    if "offload" in problem.levers and "recompute" in problem.levers:
        return "the cbc backend models one memory lever at a time (recompute or offload); use --solver cpsat"
    return None


def _run(data, settings, state):
    from .levers import LeverModel
    from .model import solve_cbc
    from .offload import OffloadModel

    if data.lever_graph is not None:
        offload = "offload" in data.lever_graph.problem.levers
        return solve_cbc(data, settings, state, OffloadModel if offload else LeverModel)
    return solve_cbc(data, settings, state)


# CBC has no work measure: even a deterministic solve keeps to the clock.
register(Backend(
    name="cbc", run=_run, summary="CBC through PuLP: a MILP with ordering binaries",
    work_limited=False, size=ordering_pairs, size_limit=MAX_ORDERING_PAIRS, size_unit="ordering pairs",
    refuses=_refuses,
))
