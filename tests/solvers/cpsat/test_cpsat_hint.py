"""The starting schedule reaches CP-SAT as a complete, feasible solution hint."""

import pytest
from helpers import uniform
from ortools.sat.python import cp_model

import zbsolve.solvers.orchestration as orchestration
from zbsolve import solve
from zbsolve.problem.op_graph import OpGraph
from zbsolve.schedule.validator import validate
from zbsolve.solvers.cpsat.formulation import build_model
from zbsolve.solvers.cpsat.hints import add_hint
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view
from zbsolve.solvers.warm_start import best_fitting_baseline, hint_from, starter_schedule


@pytest.mark.parametrize("problem", [
    uniform(4, 8, memory="1.5x", F=1, B=1.2, W=0.7),
    uniform(4, 8, memory="1.5x", F=1, B=1.2, W=0.7, objective="span"),
    uniform(4, 8, memory="1x", placement="vshape", comm=0.1),
    uniform(4, 8, placement="bidirectional", fb_overlap=2.4, memory="2x"),
    uniform(4, 8, placement="bidirectional", fb_overlap=2.4, split_backward=False, objective="span"),
], ids=["makespan", "span", "vshape", "pairs", "fused pairs span"])
def test_every_variable_is_hinted_and_the_hint_is_the_starting_schedule(problem):
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    state = SearchState(data)
    warm = best_fitting_baseline(problem, graph) or starter_schedule(graph, data, RunSettings(deterministic=True),
                                                                     state)
    state.hint, state.hint_pairs = hint_from(warm, data)
    model, start, objective, pairs, derived = build_model(data, state)
    add_hint(model, data, state, start, derived)
    if pairs is not None:
        pairs.hint(model, state.hint_pairs)
    proto = model.Proto()
    hinted = list(proto.solution_hint.vars)
    assert len(hinted) == len(set(hinted)) == len(proto.variables)
    # Fixed to the hint, the model must accept it, at the starting schedule's value.
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20
    assert solver.Solve(model) == cp_model.OPTIMAL
    assert data.value(solver.ObjectiveValue()) == pytest.approx(warm.value)


@pytest.mark.parametrize("memory, list_runs", [(None, False), ("1x", True)])
def test_with_pairs_a_fitting_hand_made_schedule_starts_cpsat(monkeypatch, memory, list_runs):
    """See `zbsolve.solvers.orchestration.solve`: from DualPipe's structure CP-SAT's searches went further
    than from the list scheduler's shorter schedules. Where no hand-made one fits (1x), the
    list scheduler still gives the start."""
    calls = []

    def listed(graph, data, settings, state):
        calls.append(data)
        return starter_schedule(graph, data, settings, state)

    monkeypatch.setattr(orchestration, "starter_schedule", listed)
    problem = uniform(4, 8, placement="bidirectional", fb_overlap=2.4, memory=memory)
    solved = solve(problem, "cpsat", time_limit=2, workers=2)  # no worse than its start at any limit
    assert bool(calls) == list_runs
    validate(solved)
    assert solved.metrics.makespan <= (26 if list_runs else 23.6)  # the list schedule's, DualPipe's
