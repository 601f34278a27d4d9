"""The simulator reports orders that cannot run, naming the stuck op, instead of looping."""

import pytest
from helpers import uniform

from zbsolve.errors import ScheduleError
from zbsolve.ops import Op
from zbsolve.simulator import simulate


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
