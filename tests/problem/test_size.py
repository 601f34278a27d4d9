"""Size limits: counted from the problem's numbers, checked before anything large exists."""

import pytest
from helpers import placed_problems, uniform
from hypothesis import given

from zbsolve.errors import UsageError
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.problem import Pipe, Problem, Stage, StageCost
from zbsolve.problem.size import SizeError, op_count
from zbsolve.schedule.validator import validate
from zbsolve.solvers import solve


@given(placed_problems())
def test_op_count_is_the_op_list_length(problem):
    assert op_count(problem) == len(OpGraph(problem).ops())


def test_absurd_sizes_are_refused_by_the_api_before_building_anything():
    with pytest.raises(SizeError, match="12,288,000,000 ops"):
        uniform(4096, 1_000_000)
    # Counted from the bare numbers: these would need terabytes to build (the pipes' range, one
    # cost record per device) and ended in MemoryError or the machine swapping.
    with pytest.raises(SizeError, match="600,000,000,000 ops"):
        uniform(100_000_000_000, 2)
    with pytest.raises(SizeError, match=r"interleaved:100000000000 placement\) make 9,600,000,000,000 ops"):
        uniform(4, 8, placement="interleaved:100000000000")
    with pytest.raises(SizeError, match="20,000,000 ops"):
        uniform(10, 1_000_000, placement="bidirectional", split_backward=False)


def test_an_absurd_problem_built_by_hand_is_refused_by_every_entry_point():
    stages = tuple(Stage(d, 0) for d in range(4096))
    problem = Problem(devices=4096, microbatches=1_000_000, stage_costs=(StageCost(1, 1, 1, 1, 0.5),),
                      pipes=(Pipe(stages, tuple(range(1_000_000))),))
    with pytest.raises(SizeError, match="12,288,000,000 ops"):
        OpGraph(problem)
    with pytest.raises(UsageError, match="fewer microbatches"):
        solve(problem)


def test_a_memory_limit_above_every_activation_at_once_is_no_limit():
    # 1e300 on the memory grid is far beyond what a float holds exactly; no schedule can use
    # more than all activations at once, so the solvers see that much.
    assert OpGraph(uniform(2, 2, memory=1e300)).memory_limit == [40, 40]  # 2 stages x 2 microbatches x 1.0, 0.1 steps
    assert OpGraph(uniform(2, 2, memory=1e308)).memory_limit == [40, 40]  # x 10 for the grid overflowed
    for solver in ("cpsat", "cbc", "list"):
        solved = solve(uniform(2, 2, memory=1e300), solver, time_limit=5, workers=1)
        validate(solved)
        assert solved.metrics.makespan == solve(uniform(2, 2), solver, time_limit=5, workers=1).metrics.makespan
