"""The memory limit counted at each F's start (zbsolve/solvers/cpsat/counted.py)."""

from helpers import tiny_problems, uniform
from hypothesis import HealthCheck, assume, event, given, settings
from ortools.sat.python import cp_model

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.solvers.cpsat.counted import booleans, counted_terms, planned
from zbsolve.solvers.cpsat.formulation import build_model
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view


def _input(problem):
    return build_view(OpGraph(problem), problem.split_backward, problem.objective)


def test_the_model_edges_decide_most_terms():
    # Uniform costs, P=4 M=8 at 1x: 672 (F, other op) pairs, 184 left open by the edges.
    data = _input(uniform(4, 8, memory="1x"))
    terms = counted_terms(data)
    assert booleans(terms) == 184
    # Device 0's F of microbatch 5: earlier microbatches' F's have started (microbatch
    # order); later ones have not, nor have its own B and W or any later microbatch's.
    x = Op("F", 0, 0, 5)
    known = {term.op: term.known for term in terms[x]}
    assert all(known[Op("F", 0, 0, j)] is True for j in range(5))
    assert all(known[op] is False for op in known if op.kind != "F" and op.microbatch >= 5)
    assert all(known[Op("F", 0, 0, j)] is False for j in range(6, 8))
    # At 1x (4 activations) the B of microbatch 1 must have ended: microbatches 2 to 5 alive.
    assert known[Op("B", 0, 0, 1)] is True and known[Op("B", 0, 0, 2)] is None


def test_only_small_models_of_several_stages_per_device_without_pairs_get_the_counted_form():
    vshape = uniform(4, 8, memory="1x", placement="vshape")
    assert planned(_input(vshape)) is not None
    assert planned(_input(vshape), forced=False) is None
    assert planned(_input(uniform(4, 8, placement="vshape"))) is None  # no memory limit
    assert planned(_input(uniform(4, 8, memory="1x"))) is None  # one stage per device
    assert planned(_input(uniform(4, 8, memory="1x")), forced=True) is not None
    assert planned(_input(uniform(4, 8, memory="2x", placement="bidirectional", fb_overlap=2.4))) is None
    assert planned(_input(uniform(8, 48, memory="1x", placement="vshape"))) is None  # over the cap


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_problems())
def test_decided_terms_hold_in_every_solution_of_the_model_without_them(problem):
    # Terms are decided by the edges the model holds (dependencies, microbatch order, memory-
    # implied edges): any schedule of the model without the counted form must agree with them.
    assume(problem.memory_limit is not None and problem.fb_overlap is None)
    data = _input(problem)
    model, start, _, _, _ = build_model(data, SearchState(data), counted_memory=False)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 2
    solver.parameters.num_workers = 1
    solver.parameters.stop_after_first_solution = True
    status = solver.Solve(model)
    event(solver.StatusName(status))
    assume(status in (cp_model.OPTIMAL, cp_model.FEASIBLE))
    begin = {op: solver.Value(var) for op, var in start.items()}
    for x, terms in counted_terms(data).items():
        for term in terms:
            if term.known is not None:
                y = term.op
                happened = (begin[y] < begin[x] if y.kind == "F" else begin[y] + data.duration[y] <= begin[x])
                assert happened == term.known, (x, term)
