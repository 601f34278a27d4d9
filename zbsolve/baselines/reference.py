"""The 1F1B reference every result is compared to: 1F1B on the single chain of the same model."""

from __future__ import annotations

from dataclasses import replace

from zbsolve.baselines import run_baseline
from zbsolve.errors import ProblemError
from zbsolve.problem.placements import build_pipes, build_problem, parse_placement
from zbsolve.problem.problem import Pipe, Problem, StageCost
from zbsolve.schedule.schedule import Schedule


def single_chain_costs(problem: Problem) -> list[StageCost]:
    """Rank-stage costs of the single placement holding the same layers.

    A one-pipe model of V*P stages puts stages kV..kV+V-1 on rank-stage k; a two-pipe
    (bidirectional) model is two copies of one chain, so pipe 0 is that chain. Each chunk's
    op holds the runtime's per-op overhead; the rank-stage's one op holds it once.
    """
    stages = problem.pipes[0].stages
    per_rank = len(stages) // problem.devices
    extra = (per_rank - 1) * problem.op_overhead
    records = []
    for k in range(problem.devices):
        parts = [problem.stage_costs[s.cost] for s in stages[k * per_rank:(k + 1) * per_rank]]
        fused = None if all(c.fused is None for c in parts) else sum(c.backward_time(False) for c in parts) - extra
        F, B, W = (max(0.0, sum(getattr(c, f) for c in parts) - extra) for f in ("F", "B", "W"))
        records.append(StageCost(F, B, W, sum(c.activation for c in parts), sum(c.residual for c in parts),
                                 fused=fused))
    return records


def named_shape(problem: Problem) -> bool:
    """Whether the pipes are those of the named placement the problem says it has (a
    hand-built problem, or a hand-edited file, has no single chain to compare with)."""
    try:
        built, _ = build_pipes(parse_placement(problem.placement), problem.devices, problem.microbatches)
    except ProblemError:
        return False

    def shape(pipes: tuple[Pipe, ...]) -> list:
        return [([s.device for s in pipe.stages], pipe.microbatches) for pipe in pipes]

    return shape(built) == shape(problem.pipes)


def reference_problem(problem: Problem) -> Problem | None:
    """1F1B's problem: the single chain of the same model; None for hand-built pipes."""
    if not named_shape(problem):
        return None
    if problem.placement == "single":
        return problem
    chain = build_problem(
        problem.devices, problem.microbatches, single_chain_costs(problem),
        comm=problem.comm, split_backward=problem.split_backward,
        objective=problem.objective, time_unit=problem.time_unit, memory_unit_name=problem.memory_unit_name,
    )
    return replace(chain, memory_limit=problem.memory_limit, op_overhead=problem.op_overhead)


def one_f_one_b_reference(problem: Problem) -> Schedule | None:
    """1F1B on the single chain of the same model, or None where there is none (hand-built
    pipes: the speed-up against 1F1B is then not defined)."""
    chain = reference_problem(problem)
    return None if chain is None else run_baseline("1f1b", chain)


def one_f_one_b_as_run(problem: Problem) -> Schedule | None:
    """1F1B as a runtime that fuses the backward runs it: where the costs give a fused time
    (BW) and the problem splits B and W, 1F1B timed with BW when that is faster, named so;
    else the reference above. A split problem times 1F1B's BW as B + W (docs/design.md)."""
    split = one_f_one_b_reference(problem)
    if split is None or not problem.split_backward or all(c.fused is None for c in problem.stage_costs):
        return split
    fused = one_f_one_b_reference(replace(problem, split_backward=False))
    if fused is None or fused.value >= split.value:
        return split
    return fused.with_solver(fused.solver, name="1f1b (fused BW)")
