"""The Zero Bubble automatic greedy: valid and within the memory limit wherever it claims to
fit, and the papers' handcrafted optima on uniform costs (ZB-1p at 1x, ZB-2p at 2x)."""

import pytest
from helpers import small_problems, uniform
from hypothesis import assume, given

from zbsolve.baselines import applicable, run_baseline
from zbsolve.schedule.validator import validate


@pytest.mark.parametrize("P, M", [(2, 4), (4, 8), (4, 12), (8, 16)])
def test_at_one_x_it_reaches_zb_h1_and_at_two_x_a_zero_span_bubble(P, M):
    at_1x = run_baseline("zb-auto", uniform(P, M, memory="1x"))
    validate(at_1x)
    assert at_1x.metrics.makespan == run_baseline("zb-h1", uniform(P, M, memory="1x")).metrics.makespan
    at_2x = run_baseline("zb-auto", uniform(P, M, memory="2x"))
    validate(at_2x)
    assert at_2x.metrics.span_bubble_rate == pytest.approx(0.0, abs=1e-12)


@given(small_problems())
def test_wherever_it_fits_its_schedule_is_valid_and_within_the_limit(problem):
    assume("zb-auto" in applicable(problem))
    schedule = run_baseline("zb-auto", problem)
    validate(schedule)
    assert not schedule.over_memory_limit()


def test_it_needs_the_single_placement_and_a_split_backward():
    assert "zb-auto" not in applicable(uniform(4, 8, placement="vshape"))
    assert "zb-auto" not in applicable(uniform(4, 8, split_backward=False))
    assert "zb-auto" in applicable(uniform(4, 8, memory="1x"))
