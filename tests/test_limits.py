"""Size limits: counted from the problem's numbers, checked before anything large exists."""

import pytest
from helpers import placed_problems, uniform
from hypothesis import given

from zbsolve.errors import UsageError
from zbsolve.limits import MAX_MODEL_OPS, SizeError, model_size, op_count
from zbsolve.ops import OpGraph
from zbsolve.solvers import solve
from zbsolve.solvers.base import build_input


@given(placed_problems())
def test_op_count_is_the_op_list_length(problem):
    assert op_count(problem) == len(OpGraph(problem).ops())


@given(placed_problems())
def test_cpsat_size_counts_ops_and_every_possible_pair(problem):
    from ortools.sat.python import cp_model

    from zbsolve.solvers.cpsat.pairs import Pairs

    data = build_input(OpGraph(problem), problem.split_backward, problem.objective)
    pairs = 0
    if data.pair_duration is not None:
        model = cp_model.CpModel()
        start = {op: model.NewIntVar(0, data.horizon, "") for op in data.ops}
        pairs = len(Pairs(model, data, start).literal)
    assert op_count(problem) + pairs <= model_size(problem, "cpsat")


def test_absurd_sizes_are_refused_by_the_api_before_building_anything():
    problem = uniform(4096, 1_000_000)
    with pytest.raises(SizeError, match="12,288,000,000 ops"):
        OpGraph(problem)
    with pytest.raises(UsageError, match="fewer microbatches"):
        solve(problem)


def test_the_model_limit_sits_between_solvable_and_refused():
    assert model_size(uniform(32, 256), "cpsat") == 24_576 < MAX_MODEL_OPS
    with pytest.raises(SizeError, match="cpsat model of 393,216 ops"):
        solve(uniform(32, 4096))
