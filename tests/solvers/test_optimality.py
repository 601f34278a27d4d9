"""An `optimal` status against the plainest exact model (tests/exact_model.py).

zbsolve's model adds what the plain one leaves out: identical microbatches taken in order,
memory-implied edges with their delays, a horizon cut to the starting schedule, proofs by
the lower bound and mirror-image searches. Each must keep at least one optimal schedule, or
zbsolve would call a worse one optimal; this checks that on random tiny problems, and
with F&B pairs against the exhaustive search of tests/brute_force.py.
"""

import pytest
from brute_force import brute_force_makespan
from exact_model import plain_solve
from helpers import tiny_pair_problems, tiny_problems
from hypothesis import HealthCheck, event, given, settings

from zbsolve.schedule.validator import validate
from zbsolve.solvers import solve


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_problems())
def test_an_optimal_status_holds_against_the_plain_model(problem):
    # Two workers stop by the clock: a tiny span problem can take either model well past 5 s
    # of its work measure. An unproven answer only has to be valid and no better than optimal.
    solved = solve(problem, "cpsat", time_limit=5, workers=2)
    validate(solved)
    value = solved.metrics.span if problem.objective == "span" else solved.metrics.makespan
    best, proven = plain_solve(problem, time_limit=5)
    assert best is not None, "tiny problems always have a schedule within the time limit"
    event(f"zbsolve {solved.solver.status}, plain model {'proven' if proven else 'not proven'}")
    if solved.solver.status == "optimal":
        assert value <= best + 1e-6 * max(1.0, best)  # nothing the plain model found is better
    if proven:
        assert value >= best - 1e-6 * max(1.0, best)  # and a valid schedule cannot beat its optimum
        assert solved.solver.bound <= best + 1e-6 * max(1.0, best)


def test_a_v_shape_at_half_memory_is_proven_at_the_plain_optimum():
    # P=2 V-shape at 0.5x, uneven costs: memory-implied edges with delays apply (the F of
    # microbatch 2 waits 7 units past the B of microbatch 0) and the static bound (14.55)
    # lies below the plain model's optimum, so zbsolve's own model must prove 16.75.
    from helpers import uniform

    problem = uniform(2, 4, F=1.0, B=1.2, W=0.7, placement="vshape", memory="0.5x")
    best, proven = plain_solve(problem, time_limit=30)
    assert proven and best == pytest.approx(16.75)
    solved = solve(problem, "cpsat", time_limit=30, workers=1)
    assert solved.solver.status == "optimal"
    assert solved.metrics.makespan == pytest.approx(best)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_pair_problems())
def test_an_optimal_status_with_pairs_matches_exhaustive_search(problem):
    # F&B pairs bring their own pruning (pair candidates by time window, memory edges kept
    # to one-stage devices, mirror-image searches); the exhaustive search knows none of it.
    best = brute_force_makespan(problem)
    solved = solve(problem, "cpsat", time_limit=5, workers=2)
    validate(solved)
    event(f"zbsolve {solved.solver.status}")
    assert solved.metrics.makespan >= best - 1e-6 * max(1.0, best)
    if solved.solver.status == "optimal":
        assert solved.metrics.makespan == pytest.approx(best)
