"""The recompute lever in the solve (the models in zbsolve/solvers/cpsat/levers.py and
zbsolve/solvers/cbc/levers.py, the relaxation in zbsolve/solvers/view.py): optima against
exhaustive search, the relaxation's bound, and the solve never worse than the one without
levers."""

from functools import cache

import pytest
from brute_force import brute_force_levers_makespan
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.errors import UsageError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers.orchestration import lower_bound, solve

RECOMPUTE = ("recompute",)
exhaustive = cache(brute_force_levers_makespan)  # each problem searched once for both solvers


def tiny(M, memory, placement="single", split=True, **cost):
    costs = dict(F=1, B=2, W=1, activation=1, residual=0.5, checkpoint=0.2, recompute=1) | cost
    devices = 2
    return build_problem(devices, M, StageCost(**costs), placement=placement, memory=[memory] * devices,
                         split_backward=split, levers=RECOMPUTE)


@pytest.mark.parametrize("problem", [
    tiny(2, 1.0),  # one activation at a time: recomputing lets a second microbatch start
    tiny(2, 1.5),
    tiny(2, 2.0),  # room for both: recomputation only costs time
    tiny(2, 1.0, split=False),
    tiny(2, 1.2, recompute=0.5, checkpoint=0.1, W=0.5),
    tiny(2, 1.25, F=2, B=1, W=1.5, recompute=3, checkpoint=0.5),  # a checkpoint above the residual
], ids=["P2M2-1.0", "P2M2-1.5", "P2M2-2.0", "P2M2-fused", "P2M2-short-R", "P2M2-long-R"])
@pytest.mark.parametrize("solver", ["cpsat", "cbc"])
def test_the_optimum_with_recomputation_is_the_exhaustive_search_s(problem, solver):
    expected = exhaustive(problem)
    # without a starting schedule: the model alone proves it
    schedule = solve(problem, solver, time_limit=30, workers=1, warm_start=False)
    validate(schedule)
    assert schedule.solver.status == "optimal"
    assert schedule.value == pytest.approx(expected)
    assert lower_bound(problem) <= expected + 1e-9


def test_with_memory_short_the_solve_recomputes_and_beats_every_schedule_without():
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.1)
    plain = build_problem(4, 6, costs, memory="0.34x")
    levers = build_problem(4, 6, costs, memory="0.34x", levers=RECOMPUTE)
    without = solve(plain, time_limit=2, workers=1)
    assert without.solver.status == "optimal" and without.value == 54.0  # one microbatch in flight
    found = solve(levers, time_limit=1, workers=1)
    validate(found)
    recomputed = [t.op for ops in found.devices for t in ops if t.op.kind == "R"]
    assert found.value < without.value and recomputed
    assert all(f"{op.pipe}.{op.stage}FC{op.microbatch}" in {str(t.op) for ops in found.devices for t in ops}
               for op in recomputed)


def test_with_memory_to_spare_the_solve_is_no_worse_than_without_levers():
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.1)
    plain = solve(build_problem(3, 6, costs, memory="1x"), time_limit=2, workers=1)
    found = solve(build_problem(3, 6, costs, memory="1x", levers=RECOMPUTE), time_limit=3, workers=1)
    assert found.value <= plain.value


def test_the_bound_with_levers_is_the_relaxation_s_and_below_the_plain_bound():
    # the relaxation holds only the checkpoint: its bound can only drop below the plain one
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.1)
    plain = lower_bound(build_problem(4, 8, costs, memory="0.34x"))
    relaxed = lower_bound(build_problem(4, 8, costs, memory="0.34x", levers=RECOMPUTE))
    assert relaxed < plain == 72.0
    # with nothing kept but the activation itself, recomputation frees nothing: the bounds agree
    whole = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=1.0)
    assert lower_bound(build_problem(4, 8, whole, memory="0.34x", levers=RECOMPUTE)) == 72.0


@pytest.mark.parametrize("problem", [tiny(2, 1.0), tiny(2, 1.5), tiny(2, 1.0, split=False)],
                         ids=["P2M2-1.0", "P2M2-1.5", "P2M2-fused"])
def test_the_list_scheduler_recomputes_to_fit_and_never_beats_the_exhaustive_optimum(problem):
    schedule = solve(problem, "list", time_limit=2, workers=1, warm_start=False)
    validate(schedule)
    assert schedule.value >= exhaustive(problem) - 1e-9


def test_the_list_scheduler_with_recomputation_beats_itself_without():
    # 4 ranks, 8 microbatches at half of 1F1B's memory: recomputed to fit from a looser limit,
    # its orders beat the list scheduler's without levers (41) with or without starting
    # schedules; the CP-SAT optimum with the lever is 31
    costs = StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.1)
    plain = solve(build_problem(4, 8, costs, memory="0.5x"), "list", time_limit=2, workers=1)
    problem = build_problem(4, 8, costs, memory="0.5x", levers=RECOMPUTE)
    alone = solve(problem, "list", time_limit=2, workers=1, warm_start=False)
    validate(alone)
    assert plain.value == 41 and 31 <= alone.value < 41 and alone.recomputed() > 0


def test_levers_with_pairs_or_the_span_are_refused():
    with pytest.raises(UsageError, match="not modelled"):
        solve(build_problem(2, 4, StageCost(1, 1, 1), placement="vshape", fb_overlap=2.5, levers=RECOMPUTE),
              time_limit=1)
    with pytest.raises(UsageError, match="makespan objective only"):
        solve(build_problem(2, 4, StageCost(1, 1, 1), objective="span", levers=RECOMPUTE), time_limit=1)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(F=st.integers(1, 3), B=st.integers(1, 3), W=st.integers(0, 2), R=st.integers(1, 3),
       checkpoint=st.sampled_from([0.0, 0.25, 0.5]), memory=st.sampled_from([1.0, 1.25, 1.5, 2.0]),
       split=st.booleans())
def test_on_random_tiny_problems_the_bound_is_below_and_each_proven_value_is_the_exhaustive_optimum(
        F, B, W, R, checkpoint, memory, split):
    problem = tiny(2, memory, split=split, F=F, B=B, W=W + 0.5, recompute=R, checkpoint=checkpoint)
    expected = brute_force_levers_makespan(problem)
    assert lower_bound(problem) <= expected + 1e-9
    for solver in ("cpsat", "cbc"):
        schedule = solve(problem, solver, time_limit=10, workers=1)
        validate(schedule)
        assert schedule.value >= expected - 1e-9
        if schedule.solver.status == "optimal":
            assert schedule.value == pytest.approx(expected)
