"""The CP-SAT backend's size: what it counts, and what answers above its limit."""

from dataclasses import replace

from helpers import placed_problems, uniform
from hypothesis import given

from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.size import op_count
from zbsolve.schedule.validator import validate
from zbsolve.solvers import registry, solve
from zbsolve.solvers.cpsat import MAX_MODEL_SIZE, model_size
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view


@given(placed_problems())
def test_cpsat_size_counts_ops_and_every_possible_pair(problem):
    from ortools.sat.python import cp_model

    from zbsolve.solvers.cpsat.pairs import Pairs

    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    pairs = 0
    if data.pair_duration is not None:
        model = cp_model.CpModel()
        start = {op: model.NewIntVar(0, data.horizon, "") for op in data.ops}
        pairs = len(Pairs(model, data, start, [], SearchState(data)).literal)
    assert op_count(problem) + pairs <= model_size(problem)



def test_models_above_the_cpsat_limit_are_answered_by_the_list_scheduler(monkeypatch):
    assert model_size(uniform(32, 256)) == 24_576 < MAX_MODEL_SIZE
    assert model_size(uniform(32, 4096)) == 393_216 > MAX_MODEL_SIZE
    # A small problem stands in for a huge one.
    monkeypatch.setitem(registry._BACKENDS, "cpsat", replace(registry.get("cpsat"), size_limit=100))
    solved = solve(uniform(4, 16, memory="1x"), "cpsat", time_limit=5, workers=1)
    validate(solved)
    assert "above the cpsat model limit of 100: answered by the list backend" in solved.solver.message
    assert solved.solver.status in ("optimal", "feasible")
