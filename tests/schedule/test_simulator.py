"""The simulator reports orders that cannot run, naming the stuck op, instead of looping; it
times copies (the offload lever) beside compute."""

import pytest
from helpers import uniform

from zbsolve.errors import ScheduleError
from zbsolve.problem.op_graph import Op
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.simulator import simulate
from zbsolve.schedule.validator import validate


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


def test_copies_run_beside_compute_each_issued_after_the_op_listed_before_it():
    # P=2, M=2, unit costs, copies of 1: the first stage offloads microbatch 0 (hand-timed)
    problem = build_problem(2, 2, StageCost(1, 1, 1, offload=1), levers=("offload",))
    orders = [[Op.parse(t) for t in "0.0FO0 0.0O0 0.0F1 0.0L0 0.0B0 0.0B1 0.0W0 0.0W1".split()],
              [Op.parse(t) for t in "0.1F0 0.1B0 0.1F1 0.1B1 0.1W0 0.1W1".split()]]
    s = simulate(problem, orders)
    validate(s)
    times = {str(t.op): (t.start, t.end) for ops in s.devices for t in ops}
    # O0 after FO0; L0 issued with F1 (at 1) but waits for O0's end; B0 waits for L0 and for 0.1B0
    assert times["0.0O0"] == (1, 2) and times["0.0L0"] == (2, 3) and times["0.0B0"] == (3, 4)
    assert times["0.0B1"] == (5, 6) and s.metrics.makespan == 8
    assert s.metrics.busy == (6, 6)  # copies are not compute
    # FO0 until O0 ends at 2 and F1 from 1: two activations; L0 takes one back as F1 still holds
    assert s.metrics.peak_memory == (2.0, 1.5)
    # listed after B1 (which starts at 5), the copy back starts no earlier than that: B0 waits
    later = [[op for op in orders[0] if op.kind != "L"], orders[1]]
    later[0].insert(later[0].index(Op.parse("0.0B1")) + 1, Op.parse("0.0L0"))
    with pytest.raises(ScheduleError, match="waits for the activation back on the device"):
        simulate(problem, later)
