"""The V-shape generators of the Zero Bubble authors: their ZB-V greedy (`zb-v-auto`) and the
controllable-memory building blocks V-Min and V-Half. Valid everywhere; the papers' claims
on uniform costs: the greedy reaches ZB-V's zero span bubble at 1F1B's memory, V-Min and
V-Half hold less memory than ZB-V, V-Min the least."""

import pytest
from helpers import stage_costs, uniform
from hypothesis import assume, given
from hypothesis import strategies as st

from zbsolve.baselines import applicable, run_baseline
from zbsolve.baselines.v_blocks import _PASSES, _PERIOD, _v_half_block, _v_min_block
from zbsolve.problem.placements import build_problem
from zbsolve.schedule.validator import validate

SHAPES = [(P, M) for P in (2, 3, 4, 5, 6, 8) for M in (1, P, 2 * P + 1, 3 * P)]


@pytest.mark.parametrize("block", [_v_min_block, _v_half_block])
@pytest.mark.parametrize("P", range(1, 65))
def test_a_building_block_gives_each_rank_four_distinct_slots_per_period(block, P):
    for r in range(P):
        offsets = block(P, r)
        assert len(offsets) == len(_PASSES)
        assert len({o % _PERIOD for o in offsets}) == 4  # repeated every six slots, they never collide
        f_down, f_back, b_back, b_down = offsets
        assert f_down < f_back < b_back < b_down  # one microbatch's passes in dependency order


@pytest.mark.parametrize("P, M", SHAPES)
@pytest.mark.parametrize("name", ["v-min", "v-half", "zb-v-auto"])
def test_every_v_generator_is_valid(name, P, M):
    schedule = run_baseline(name, uniform(P, M, placement="vshape", comm=0.25))
    validate(schedule)
    assert sum(len(ops) for ops in schedule.devices) == P * 2 * 3 * M


@pytest.mark.parametrize("P, M", [(P, M) for P in (2, 3, 4, 6, 8) for M in (2 * P, 3 * P)])
def test_the_greedy_reaches_a_zero_span_bubble_at_one_x(P, M):
    schedule = run_baseline("zb-v-auto", uniform(P, M, placement="vshape", memory="1x"))
    validate(schedule)
    assert schedule.metrics.span == 3 * M  # every rank busy from its first op to its last
    assert max(schedule.metrics.peak_memory) <= P


@pytest.mark.parametrize("P, M", [(P, M) for P in (4, 6, 8) for M in (2 * P, 3 * P)])
def test_v_min_holds_less_than_v_half_which_holds_less_than_zb_v(P, M):
    problem = uniform(P, M, placement="vshape")
    peak = {name: max(run_baseline(name, problem).metrics.peak_memory) for name in ("v-min", "v-half", "zb-v")}
    assert peak["v-min"] < peak["v-half"] < peak["zb-v"] == P
    assert peak["v-min"] <= P / 2 and peak["v-half"] <= 3 * P / 4


@st.composite
def vshape_problems(draw):
    P, M = draw(st.integers(1, 4)), draw(st.integers(1, 8))
    return build_problem(P, M, draw(stage_costs(P)), placement="vshape",
                         comm=draw(st.sampled_from([0.0, 0.1, 0.5])),
                         memory=draw(st.sampled_from([None, "0.5x", "0.75x", "1x", "1.5x", "3x"])))


@given(vshape_problems())
def test_the_greedy_stays_within_any_limit_it_accepts(problem):
    assume("zb-v-auto" in applicable(problem))
    schedule = run_baseline("zb-v-auto", problem)
    validate(schedule)
    assert not schedule.over_memory_limit()


def test_they_need_the_vshape_placement_and_a_split_backward():
    for name in ("v-min", "v-half", "zb-v-auto"):
        assert name not in applicable(uniform(4, 8))
        assert name not in applicable(uniform(4, 8, placement="vshape", split_backward=False))
        assert name in applicable(uniform(4, 8, placement="vshape", memory="1x"))
