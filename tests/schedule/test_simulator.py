"""The simulator reports orders that cannot run, naming the stuck op, instead of looping."""

import pytest
from helpers import uniform

from zbsolve.errors import ScheduleError
from zbsolve.problem.op_graph import Op
from zbsolve.schedule.simulator import simulate


def test_deadlocked_order_names_the_stuck_op():
    problem = uniform(2, 1)
    # device 0 puts its backward before its forward: it waits for stage 1's input gradient,
    # which waits for stage 1's forward, which waits for device 0's forward.
    orders = [[Op("BW", 0, 0, 0), Op("F", 0, 0, 0)], [Op("F", 0, 1, 0), Op("BW", 0, 1, 0)]]
    with pytest.raises(ScheduleError, match="device 0 is stuck at BW pipe 0 stage 0 microbatch 0"):
        simulate(problem, orders)


def test_incomplete_and_misplaced_orders_are_refused():
    problem = uniform(2, 1)
    with pytest.raises(ScheduleError, match="BW pipe 0 stage 1 microbatch 0 is missing"):
        simulate(problem, [[Op("F", 0, 0, 0), Op("BW", 0, 0, 0)], [Op("F", 0, 1, 0)]])
    with pytest.raises(ScheduleError, match="lives on device 1"):
        simulate(problem, [[Op("F", 0, 1, 0)], []])


F0, BW0, F1, BW1 = Op("F", 0, 0, 0), Op("BW", 0, 0, 0), Op("F", 0, 1, 0), Op("BW", 0, 1, 0)
V_ONE = dict(placement="vshape")  # P=1: stages 0 and 1 on device 0, so pairs of them may form


@pytest.mark.parametrize("kw, orders, message", [
    ({}, [[F0, BW0]], "need an order for each of 2 devices, got 1"),
    ({}, [[(F0, BW0, F1)], [BW1]], "device 0: a slot holds 3 ops"),
    (dict(split_backward=False), [[F0, Op("B", 0, 0, 0), Op("W", 0, 0, 0)], [F1, BW1]],
     "uses kind B, but this problem allows BW, F"),
    ({}, [[F0, BW0, Op("F", 0, 0, 1)], [F1, BW1]], "F pipe 0 stage 0 microbatch 1 is not part of the problem"),
    ({}, [[F0, BW0, F0], [F1, BW1]], "F pipe 0 stage 0 microbatch 0 appears twice"),
    ({}, [[F0, Op("B", 0, 0, 0), Op("W", 0, 0, 0), BW0], [F1, BW1]],
     r"BW pipe 0 stage 0 microbatch 0 also has B and W: a microbatch runs through a stage one way "
     r"\(F, BW or F, B, W\)"),
])
def test_orders_that_are_not_the_problem_are_refused(kw, orders, message):
    with pytest.raises(ScheduleError, match=message):
        simulate(uniform(2, 1, **kw), orders)


@pytest.mark.parametrize("fb_overlap, slot, message", [
    (None, (F0, BW1), "overlapped pair .* needs fb_overlap"),
    (1.5, (F0, F1), r"an overlapped pair is one F and one B or BW, got \['F', 'F'\]"),
    (1.5, (F1, BW1), "overlapped pair .* is one stage"),
])
def test_malformed_pairs_are_refused(fb_overlap, slot, message):
    rest = [op for op in (F0, F1, BW1, BW0) if op not in slot]
    with pytest.raises(ScheduleError, match=message):
        simulate(uniform(1, 1, fb_overlap=fb_overlap, **V_ONE), [[slot, *rest]])
