"""Property tests over random small problems (uneven costs, comm, residual ratios, limits)."""

import json

import pytest
from helpers import hand_built_problems, placed_problems, small_problems
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.baselines import applicable, run_baseline
from zbsolve.errors import ValidationError
from zbsolve.formats.schedule_json import dumps, schedule_from_dict, schedule_to_dict
from zbsolve.problem.op_graph import OpGraph
from zbsolve.schedule.validator import validate
from zbsolve.solvers import bounds, solve
from zbsolve.solvers.view import build_view
from zbsolve.solvers.warm_start import best_fitting_baseline


def check_every_applicable_baseline(problem):
    for name in applicable(problem):
        s = run_baseline(name, problem)
        if s.over_memory_limit():
            # the simulator's peak and the validator's must agree that the limit is broken
            with pytest.raises(ValidationError, match="above the limit"):
                validate(s)
        else:
            validate(s)  # also recomputes every reported metric


@given(small_problems())
def test_every_baseline_validates_and_agrees_with_the_validator(problem):
    check_every_applicable_baseline(problem)


@given(small_problems(), st.sampled_from(["gpipe", "1f1b", "zb-h1", "zb-h2"]))
def test_json_round_trip_is_lossless(problem, name):
    s = run_baseline(name, problem)
    again = schedule_from_dict(json.loads(dumps(s)))
    assert again == s
    assert schedule_to_dict(again) == schedule_to_dict(s)


@settings(max_examples=40)
@given(small_problems(max_devices=3, max_microbatches=4))
def test_solved_is_never_worse_than_a_fitting_baseline_and_validates(problem):
    solved = solve(problem, "cpsat", time_limit=10, workers=1)
    validate(solved)
    best = best_fitting_baseline(problem, OpGraph(problem))
    value = solved.metrics.span if problem.objective == "span" else solved.metrics.makespan
    if best is not None:
        reference = best.metrics.span if problem.objective == "span" else best.metrics.makespan
        assert value <= reference + 1e-9
    assert solved.solver.bound <= value + 1e-9
    if solved.solver.status == "optimal":
        assert solved.solver.gap == 0


@given(placed_problems())
def test_baselines_on_every_placement_validate(problem):
    check_every_applicable_baseline(problem)


@settings(max_examples=30)
@given(placed_problems(max_microbatches=4))
def test_solved_on_every_placement_validates_and_beats_fitting_baselines(problem):
    solved = solve(problem, "cpsat", time_limit=10, workers=1)
    validate(solved)
    value = solved.metrics.span if problem.objective == "span" else solved.metrics.makespan
    best = best_fitting_baseline(problem, OpGraph(problem))
    if best is not None:
        assert value <= (best.metrics.span if problem.objective == "span" else best.metrics.makespan) + 1e-9
    assert solved.solver.bound <= value + 1e-9


@settings(max_examples=40)
@given(hand_built_problems())
def test_hand_built_problems_get_valid_schedules_above_their_bound(problem):
    # Found by a random search over such problems: the list scheduler divided by a device's
    # activation when it was 0; a W of cost 0 was put after an F that started with it, so it
    # freed its memory only after that F had allocated; and with forwards of cost 0 (refused
    # now) CBC's pairwise orders could form a cycle at one instant, each F seeing too few.
    check_every_applicable_baseline(problem)
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    bound = data.value(bounds.lower_bound(data))
    for solver in ("list", "cpsat"):
        solved = solve(problem, solver, time_limit=5, workers=1)
        validate(solved)
        value = solved.metrics.span if problem.objective == "span" else solved.metrics.makespan
        assert bound <= solved.solver.bound <= value + 1e-9
