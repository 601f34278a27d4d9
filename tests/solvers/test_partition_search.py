"""`--partition auto` on small problems equals an exhaustive search over every contiguous
split, each split solved to optimality by the plain exact model."""

import math

import pytest
from exact_model import plain_optimum

from zbsolve.problem import partition
from zbsolve.problem.partition import Layer
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers.partition_search import search, shape_of

HEAVY_ENDS = [(0.5, 0.0, 0.5), (2.0, 2.0, 1.0), (1.0, 1.5, 0.5), (2.0, 2.0, 1.0), (1.5, 1.0, 1.0), (4.0, 4.0, 2.0)]


def layers_of(costs) -> list[Layer]:
    return [Layer(f"l{i}", (f"l{i}",), StageCost(F, B, W, 1.0, 0.5)) for i, (F, B, W) in enumerate(costs)]


@pytest.mark.parametrize("devices, placement, count, memory", [
    (2, "single", 5, None), (3, "single", 5, "1x"), (2, "vshape", 6, None), (2, "interleaved:2", 5, "1.5x"),
])
def test_auto_equals_every_split_solved_to_optimality(devices, placement, count, memory):
    layers = layers_of(HEAVY_ENDS[:count - 1] + HEAVY_ENDS[-1:])
    M = devices + (1 if devices == 2 else 0)
    stages = partition.stage_count(placement, devices, M)
    problem_for = partition.split_problems(layers, devices, M, placement=placement, comm=0.25, memory=memory)
    even = problem_for(partition.even_split(layers, stages))

    optima = {}
    for split in partition.every_split(len(layers), stages):
        optima[split] = plain_optimum(problem_for(split), time_limit=60)
        assert optima[split] is not None
    best = min(optima.values())
    answer = search(layers, stages, problem_for, solver="cpsat", time_limit=400, workers=1, max_solves=100)
    assert answer.best.schedule is not None
    validate(answer.best.schedule)
    assert answer.best.schedule.value == pytest.approx(best)
    assert optima[answer.best.split] == pytest.approx(best)
    assert answer.bound <= best + 1e-6
    assert answer.splits == len(optima)
    # the splits users run are each solved, and none is better than the answer
    assert {s.name for s in answer.named} >= {"even"}
    assert all(s.schedule is None or s.schedule.value >= answer.best.schedule.value - 1e-9 for s in answer.solved)
    # splits left unsolved were pruned by a bound at least the answer's value
    unsolved = set(optima) - {s.split for s in answer.solved}
    assert all(partition.split_bound(shape_of(even), partition.stage_costs(layers, s))
               >= answer.best.schedule.value - 1e-9 for s in unsolved)
    assert math.isfinite(answer.bound)


def test_a_search_stopped_before_its_first_solve_answers_without_a_schedule():
    import threading

    layers = layers_of(HEAVY_ENDS)
    stop = threading.Event()
    stop.set()

    def problem_for(split):
        return build_problem(2, 4, partition.stage_costs(layers, split), per_stage=True)

    answer = search(layers, 2, problem_for, time_limit=10, workers=1, stop=stop)
    assert answer.solved == [] and answer.best.schedule is None
    # no split solved: the bound is the least split bound over every split
    assert answer.bound == pytest.approx(min(partition.split_bound(shape_of(problem_for((3, 3))),
                                                                   partition.stage_costs(layers, s))
                                             for s in partition.every_split(len(layers), 2)))
