"""The 1F1B reference every result is compared to: 1F1B on the single chain of the same model."""

from __future__ import annotations

from dataclasses import replace

from zbsolve.baselines import run_baseline
from zbsolve.placements import build_problem
from zbsolve.problem import Problem, StageCost
from zbsolve.schedule import Schedule


def single_chain_costs(problem: Problem) -> list[StageCost]:
    """Rank-stage costs of the single placement holding the same layers.

    A one-pipe model of V*P stages puts stages kV..kV+V-1 on rank-stage k; a two-pipe
    (bidirectional) model is two copies of one chain, so pipe 0 is that chain.
    """
    stages = problem.pipes[0].stages
    per_rank = len(stages) // problem.devices
    records = []
    for k in range(problem.devices):
        parts = [problem.stage_costs[s.cost] for s in stages[k * per_rank:(k + 1) * per_rank]]
        records.append(StageCost(*(sum(getattr(c, f) for c in parts)
                                   for f in ("F", "B", "W", "activation", "residual"))))
    return records


def reference_problem(problem: Problem) -> Problem:
    if problem.placement == "single":
        return problem
    chain = build_problem(
        problem.devices, problem.microbatches, single_chain_costs(problem),
        comm=problem.comm, split_backward=problem.split_backward,
        objective=problem.objective, time_unit=problem.time_unit,
    )
    return replace(chain, memory_limit=problem.memory_limit)


def one_f_one_b_reference(problem: Problem) -> Schedule:
    return run_baseline("1f1b", reference_problem(problem))
