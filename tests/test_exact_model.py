"""The plain exact model the optimality and bound tests trust: it accepts what is valid and
refuses what is not."""

import pytest
from exact_model import plain_solve, plain_starts
from helpers import uniform

from zbsolve.baselines import run_baseline


def test_the_plain_model_accepts_a_valid_schedule_and_rejects_a_broken_one():
    problem = uniform(2, 3, memory="1x", F=1, B=1.2, W=0.7)
    for name in ("zb-h1", "1f1b"):  # B and W apart; fused (read as B, then W straight after)
        schedule = run_baseline(name, problem)
        starts = plain_starts(schedule)
        assert plain_solve(problem, 10, 1, fixed=starts) == (pytest.approx(schedule.metrics.makespan), True)
        last = max(starts, key=starts.get)
        assert plain_solve(problem, 10, 1, fixed={**starts, last: 0.0}) == (None, True)  # before its inputs
