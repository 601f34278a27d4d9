"""The validator catches each kind of violation and names the op."""

from dataclasses import replace

import pytest
from helpers import uniform

from zbsolve.baselines import run_baseline
from zbsolve.errors import ProblemError, ValidationError
from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.schedule.schedule import TimedOp
from zbsolve.schedule.validator import RELATIVE_TOLERANCE, validate
from zbsolve.solvers import solve


@pytest.fixture
def schedule():
    s = run_baseline("zb-h1", uniform(3, 4, comm=0.5, memory="1x"))
    validate(s)
    return s


def mutate(s, device, index, **changes):
    ops = list(s.devices[device])
    ops[index] = replace(ops[index], **changes)
    devices = list(s.devices)
    devices[device] = tuple(ops)
    return replace(s, devices=tuple(devices))


def with_ops(s, device, ops):
    devices = list(s.devices)
    devices[device] = tuple(ops)
    return replace(s, devices=tuple(devices))


def test_dropped_op(schedule):
    ops = list(schedule.devices[1])
    dropped = ops.pop(3)
    missing = f"{dropped.op.kind} pipe 0 stage 1 microbatch {dropped.op.microbatch} is missing"
    with pytest.raises(ValidationError, match=missing):
        validate(with_ops(schedule, 1, ops))


def test_duplicated_op(schedule):
    ops = list(schedule.devices[0]) + [schedule.devices[0][-1]]
    with pytest.raises(ValidationError, match="appears twice"):
        validate(with_ops(schedule, 0, ops))


def test_op_on_wrong_device(schedule):
    t = schedule.devices[0][0]
    moved = replace(t, op=Op("F", 0, 1, 9))
    with pytest.raises(ValidationError, match="not an op of this problem"):
        validate(mutate(schedule, 0, 0, op=moved.op))
    with pytest.raises(ValidationError, match="lives on device 1"):
        validate(with_ops(schedule, 0, list(schedule.devices[0]) + [schedule.devices[1][0]]))


@pytest.mark.parametrize("pipe, stage, microbatch", [(1, 0, 0), (-1, 0, 0), (0, 3, 0), (0, 0, 4)])
def test_op_outside_the_problem(schedule, pipe, stage, microbatch):
    """One past the last pipe, stage or microbatch (or before the first) is named, not an
    index error."""
    with pytest.raises(ValidationError, match="F pipe .* is not an op of this problem"):
        validate(mutate(schedule, 0, 0, op=Op("F", pipe, stage, microbatch)))


def test_float_noise_is_measured_against_the_schedule_length():
    """The tolerance is relative (1e-9 of the schedule's extent): at times of 1e6 an op may start
    that much before the op ahead of it ends, as float sums drift there, and no more."""
    s = run_baseline("zb-h1", uniform(3, 4, F=1e6, B=1e6, W=1e6))
    tol = RELATIVE_TOLERANCE * s.metrics.makespan
    device = s.devices[2]
    index = next(n for n in range(1, len(device)) if device[n].start == device[n - 1].end)
    t = device[index]
    validate(mutate(s, 2, index, start=t.start - tol / 2, end=t.end - tol / 2))
    with pytest.raises(ValidationError, match="overlaps"):
        validate(mutate(s, 2, index, start=t.start - 2 * tol, end=t.end - 2 * tol))
    # The solver's claims are held to a millionth of the value, also relative.
    validate(replace(s, solver=replace(s.solver, objective=s.metrics.makespan * (1 + 5e-7))))
    with pytest.raises(ValidationError, match="solver objective"):
        validate(replace(s, solver=replace(s.solver, objective=s.metrics.makespan * (1 + 2e-6))))


def test_shortened_op(schedule):
    t = schedule.devices[2][1]
    with pytest.raises(ValidationError, match=rf"{t.op.kind} pipe 0 stage 2 .* lasts 0.5"):
        validate(mutate(schedule, 2, 1, end=t.start + 0.5))


def test_op_moved_before_its_dependency(schedule):
    t = schedule.devices[1][0]  # F of microbatch 0 on device 1: waits for device 0 plus comm
    assert t.start == 1.5
    expected = r"F pipe 0 stage 1 microbatch 0 on device 1 \[1.2, 2.2\]: starts before F pipe 0 stage 0 .* comm 0.5"
    with pytest.raises(ValidationError, match=expected):
        validate(mutate(schedule, 1, 0, start=1.2, end=2.2))


def test_two_ops_at_once(schedule):
    a, b = schedule.devices[0][0], schedule.devices[0][1]
    with pytest.raises(ValidationError, match="overlaps"):
        validate(mutate(schedule, 0, 1, start=a.start + 0.5, end=a.start + 0.5 + (b.end - b.start)))


def test_memory_limit_exceeded(schedule):
    tight = replace(schedule, problem=replace(schedule.problem, memory_limit=(2.0, 2.0, 2.0)))
    with pytest.raises(ValidationError, match="memory reaches 3, above the limit 2"):
        validate(tight)


def test_wrong_reported_metric(schedule):
    bad = replace(schedule, metrics=replace(schedule.metrics, makespan=schedule.metrics.makespan - 1))
    with pytest.raises(ValidationError, match="reported makespan"):
        validate(bad)
    bad = replace(schedule, metrics=replace(schedule.metrics, peak_memory=(1.0, 1.0, 1.0)))
    with pytest.raises(ValidationError, match=r"reported peak_memory\[0\]"):
        validate(bad)


def test_negative_start(schedule):
    t = schedule.devices[0][0]
    with pytest.raises(ValidationError, match="before time 0"):
        validate(mutate(schedule, 0, 0, start=-1.0, end=t.end - 1.0))


def test_split_ops_in_fused_problem():
    s = run_baseline("zb-h1", uniform(2, 2))
    fused = replace(s, problem=replace(s.problem, split_backward=False))
    with pytest.raises(ValidationError, match="kind B is not allowed"):
        validate(fused)


def test_overlap_needs_fb_overlap(schedule):
    ops = list(schedule.devices[0])
    ops[0] = TimedOp(ops[0].op, ops[0].start, ops[0].end, overlap=0)
    with pytest.raises(ValidationError, match="no fb_overlap"):
        validate(with_ops(schedule, 0, ops))


def test_device_count_must_match_the_problem(schedule):
    with pytest.raises(ValidationError, match="schedule lists 2 devices, problem has 3"):
        validate(replace(schedule, devices=schedule.devices[:2]))


def test_fused_and_split_backward_of_one_op(schedule):
    b = next(t for t in schedule.devices[0] if t.op.kind == "B")
    extra = TimedOp(b.op.with_kind("BW"), schedule.metrics.makespan, schedule.metrics.makespan + 2)
    with pytest.raises(ValidationError, match=f"pipe 0 stage 0 microbatch {b.op.microbatch} has both a fused BW"):
        validate(with_ops(schedule, 0, list(schedule.devices[0]) + [extra]))


@pytest.fixture
def paired():
    """DualPipe on P=4 M=8 with fb_overlap 1.5: device 0 runs F&B pairs at [7, 8.5] (its
    ops 7 and 8, F pipe 0 stage 0 microbatch 3 with BW pipe 1 stage 3 microbatch 5) and later."""
    s = run_baseline("dualpipe", uniform(4, 8, placement="bidirectional", fb_overlap=1.5))
    validate(s)
    ops = s.devices[0]
    assert [(t.op.kind, t.start, t.end, t.overlap) for t in ops[7:9]] == [("F", 7, 8.5, 0), ("BW", 7, 8.5, 0)]
    return s


@pytest.mark.parametrize("mutation, message", [
    # a third op (microbatch 5's F just before, moved into the pair's slot) joins pair 0
    (lambda s: mutate(s, 0, 6, overlap=0, start=7.0, end=8.5), "overlap group has 3 ops, not an F&B pair"),
    # F microbatch 1 and F microbatch 2 of stage 0 marked as one pair
    (lambda s: mutate(mutate(s, 0, 1, overlap=9), 0, 2, overlap=9, start=1.0, end=2.0),
     r"one F and one B/BW, got \['F', 'F'\]"),
    # F and B of stage 3 microbatch 4 (pipe 1), one after the other, marked as a pair
    (lambda s: mutate(mutate(s, 0, 3, overlap=9, end=5.0), 0, 4, overlap=9, start=3.0), "must be two different stages"),
    (lambda s: mutate(s, 0, 8, end=8.7), "must share start and end"),
    (lambda s: mutate(mutate(s, 0, 7, end=9.0), 0, 8, end=9.0), "overlapped pair lasts 2, fb_overlap is 1.5"),
])
def test_malformed_pairs(paired, mutation, message):
    with pytest.raises(ValidationError, match=message):
        validate(mutation(paired))


def test_chunked_costs_stay_exact():
    """A third of a cost (interleaved:3) is whole on a grid of n x 10^k (docs/design.md, "Time"): times
    and peaks come out exact, and a schedule at the limit is neither over it nor infeasible."""
    thirds = uniform(4, 8, placement="interleaved:3", memory="1.25x")
    interleaved = run_baseline("interleaved", thirds)
    assert OpGraph(thirds).time_scale == 3
    assert interleaved.metrics.peak_memory_x == 1.25  # at the limit
    assert not interleaved.over_memory_limit()
    validate(interleaved)
    solved = solve(uniform(4, 8, placement="interleaved:3", memory="1x"), "cpsat", time_limit=10, workers=1)
    validate(solved)
    assert solved.solver.status == "optimal"
    assert solved.metrics.makespan == 25.0
    assert solved.metrics.peak_memory_x == 1.0
    # Found by the placement property test: one device, three chunks of a 2 GB activation
    # at 1x (2 GB) fit exactly; rounded to nearest they were over the limit and infeasible.
    tight = uniform(1, 1, F=0.1, B=0.1, W=0.1, activation=2, placement="interleaved:3",
                    memory="1x", split_backward=False)
    assert not run_baseline("interleaved", tight).over_memory_limit()
    validate(solve(tight, "cpsat", time_limit=10, workers=1))


def test_values_off_every_grid_validate():
    """Values with eight decimals fit no grid: times are rounded to 10^-6 and memory amounts
    rounded down, and zbsolve's own schedules of them still validate, reported peaks
    included. Rounding down keeps a schedule that fits exactly within the limit."""
    eighths = dict(F=1.00000004, B=0.99999996, W=0.33333333, activation=0.33333333, residual=0.16666667,
                   comm=0.12345674)
    for name in ("1f1b", "zb-h1"):
        validate(run_baseline(name, uniform(4, 6, memory="1x", **eighths)))
    validate(run_baseline("1f1b", uniform(4, 6, split_backward=False, **eighths)))
    exact_fit = uniform(3, 6, activation=0.66666667, memory="1x")  # 1F1B holds 3 activations: U
    one_f_one_b = run_baseline("1f1b", exact_fit)
    assert not one_f_one_b.over_memory_limit()
    validate(one_f_one_b)
    validate(solve(exact_fit, "cpsat", time_limit=10, workers=1))


def test_amounts_below_the_grid_are_refused():
    """A positive value is never whole at zero ticks: 1e-9 goes to the finest grid, where a
    forward or an activation that still rounds to nothing is refused by name instead of
    being solved as no work (a division by a zero makespan, or a forward of no length, whose
    memory no model places) or no memory (a peak of 0x U). A B or W may round to nothing."""
    assert OpGraph(uniform(2, 2, W=1e-9)).time_scale == 10**6
    with pytest.raises(ProblemError, match="F = 1e-09 ms is below the time grid's resolution"):
        OpGraph(uniform(2, 2, F=1e-9))
    with pytest.raises(ProblemError, match="activation 1e-09 is below the memory grid's resolution"):
        OpGraph(uniform(2, 2, activation=1e-9, residual=0))
    for name in ("1f1b", "zb-h1"):  # the W rounds to nothing, within the allowance
        validate(run_baseline(name, uniform(2, 2, W=1e-9)))


def test_no_activation_anywhere():
    """U = 0: peaks are 0x U, not a division by zero; a limit relative to U is refused."""
    s = run_baseline("1f1b", uniform(3, 4, activation=0, residual=0, memory=[2.0] * 3))
    validate(s)
    assert s.metrics.peak_memory_x == 0.0
    with pytest.raises(ProblemError, match="multiple of U, 1F1B.s peak, which is 0 here"):
        uniform(3, 4, activation=0, residual=0, memory="1x")


def test_rounding_allowance_is_half_a_grid_step():
    s = run_baseline("interleaved", uniform(2, 2, placement="interleaved:3", comm=0.1234564))
    validate(s)
    first = s.devices[0][0]  # an F of a third
    with pytest.raises(ValidationError, match="lasts 0.333332"):
        validate(mutate(s, 0, 0, end=first.end - 1e-6))
    late = next(t for t in s.devices[1] if t.start > 0)  # waits for device 0 plus comm
    with pytest.raises(ValidationError, match="plus comm 0.123456"):
        validate(mutate(s, 1, s.devices[1].index(late), start=late.start - 2e-6, end=late.end - 2e-6))


@pytest.mark.parametrize("claims, message", [
    (dict(status="optimal", bound=None, gap=None), "status optimal, but its bound None does not meet"),
    (dict(status="optimal", objective=18, bound=16, gap=2 / 18), "status optimal, but its bound 16"),
    (dict(objective=17, bound=16, gap=1 / 17), "solver objective 17 but the schedule's makespan is 18"),
    (dict(objective=18, bound=19, gap=0), "solver bound 19 is above the schedule's makespan 18"),
    (dict(objective=18, bound=16, gap=0.5), "solver gap 0.5 but"),
])
def test_solver_claims_must_agree_with_the_schedule(schedule, claims, message):
    """A file's status, bound and gap are what readers trust: an `optimal` without a bound
    that meets the value, or a gap that is not the bound's, does not pass."""
    assert schedule.metrics.makespan == 18
    honest = replace(schedule.solver, status="feasible", objective=18, bound=16, gap=2 / 18)
    validate(replace(schedule, solver=honest))
    with pytest.raises(ValidationError, match=message):
        validate(replace(schedule, solver=replace(honest, **claims)))


def shifted(s, by):
    """The schedule with every op moved by `by` and its metrics to match."""
    devices = tuple(tuple(replace(t, start=t.start + by, end=t.end + by) for t in ops) for ops in s.devices)
    m = s.metrics
    span = m.span
    makespan = m.makespan + by
    busy = sum(m.busy)
    metrics = replace(m, makespan=makespan, bubble_rate=1 - busy / (len(devices) * makespan))
    assert metrics.span == span
    return replace(s, devices=devices, metrics=metrics, solver=replace(s.solver, objective=None, bound=None, gap=None))


def test_the_tolerance_does_not_grow_with_where_the_schedule_lies_in_time(schedule):
    far = shifted(schedule, 1e12)
    validate(far)  # times on the grid are exact at 1e12 (below 2**52)
    device = far.devices[1]
    index = next(n for n in range(1, len(device)) if device[n].start == device[n - 1].end)
    t = device[index]
    with pytest.raises(ValidationError, match="overlaps"):
        validate(mutate(far, 1, index, start=t.start - 0.5, end=t.end - 0.5))
    w = next(n for n, t in enumerate(device) if t.op.kind == "W")
    with pytest.raises(ValidationError, match=r"W .*: lasts 0\.(6|59).*, its cost is 1"):
        validate(mutate(far, 1, w, end=device[w].start + 0.6))
    f = next(n for n, t in enumerate(far.devices[1]) if t.op.kind == "F")  # stage 1's F waits for stage 0's
    start = far.devices[0][0].start
    moved = mutate(far, 1, f, start=start, end=start + 1)
    with pytest.raises(ValidationError):
        validate(moved)


def test_a_schedule_shifted_beyond_float_resolution_is_refused_not_a_crash(schedule):
    with pytest.raises(ValidationError, match="lasts 0"):
        validate(shifted(schedule, 5e307))


def test_ops_listed_out_of_order_are_said_to_be(schedule):
    ops = list(schedule.devices[0])
    ops[0], ops[1] = ops[1], ops[0]  # disjoint times, swapped in the list
    with pytest.raises(ValidationError, match="is listed after .* but runs before it"):
        validate(with_ops(schedule, 0, ops))


# The recompute lever (docs/design.md, "Memory levers"): one stage, FC then R then B then W.
def _recomputed(memory=None, M=1):
    problem = uniform(1, M, F=1, B=2, W=1, activation=1, residual=0.5, memory=memory, levers=("recompute",))
    problem = replace(problem, stage_costs=tuple(replace(c, checkpoint=0.2) for c in problem.stage_costs))
    return run_baseline("1f1b-r", problem)


def _timed(s, *entries):
    return with_ops(s, 0, [TimedOp(Op.parse(text), start, end) for text, start, end in entries])


def test_recomputed_schedules_pass_and_hold_the_checkpoint_until_their_r():
    s = _recomputed()
    validate(s)
    assert [str(t.op) for t in s.devices[0]] == ["0.0FC0", "0.0R0", "0.0BW0"]
    assert s.metrics.peak_memory == (1.0,)


def test_an_r_after_its_backward_is_refused_naming_the_backward():
    s = _timed(_recomputed(), ("0.0FC0", 0, 1), ("0.0BW0", 1, 4), ("0.0R0", 4, 5))
    with pytest.raises(ValidationError, match=r"BW pipe 0 stage 0 microbatch 0 .* starts before R pipe 0 stage 0"):
        validate(s)


def test_a_recomputed_forward_without_its_r_is_refused():
    s = _timed(_recomputed(), ("0.0FC0", 0, 1), ("0.0BW0", 1, 4))
    with pytest.raises(ValidationError, match="R pipe 0 stage 0 microbatch 0 is missing"):
        validate(s)


def test_a_level_above_the_limit_names_the_r_that_takes_it_there():
    # two checkpoints held (0.4), then a whole activation back: 1.2 above a limit of 1.1
    s = _timed(_recomputed(memory=[1.1], M=2), ("0.0FC0", 0, 1), ("0.0FC1", 1, 2), ("0.0R0", 2, 3),
               ("0.0BW0", 3, 6), ("0.0R1", 6, 7), ("0.0BW1", 7, 10))
    with pytest.raises(ValidationError, match=r"R pipe 0 stage 0 microbatch 0 .*memory reaches 1\.2"):
        validate(s)


def test_recomputation_where_the_problem_has_no_lever_is_refused(schedule):
    s = _recomputed()
    plain = replace(s, problem=replace(s.problem, levers=()))
    with pytest.raises(ValidationError, match="kind FC is not allowed"):
        validate(plain)


# The offload lever: one stage, FO then its copy O to host, its copy L back, then the backward.
def _offloaded(memory=None, M=1):
    """A schedule of the offload problem to put hand-timed ops in (`_timed`)."""
    problem = uniform(1, M, F=1, B=2, W=1, activation=1, residual=0.5, offload=1, memory=memory,
                      levers=("offload",))
    return replace(run_baseline("1f1b", replace(problem, levers=())), problem=problem)


def test_a_backward_before_its_reload_ends_is_refused_naming_both():
    s = _timed(_offloaded(), ("0.0FO0", 0, 1), ("0.0O0", 1, 2), ("0.0L0", 2, 3), ("0.0BW0", 2.5, 5.5))
    with pytest.raises(ValidationError, match=r"BW pipe 0 stage 0 microbatch 0 .* starts before L pipe 0 stage 0 "
                                              r"microbatch 0 on device 0 \[2, 3\] ends"):
        validate(s)


def test_two_copies_at_once_on_a_channel_are_refused_naming_both():
    s = _timed(_offloaded(M=2), ("0.0FO0", 0, 1), ("0.0FO1", 1, 2), ("0.0O0", 1.5, 2.5), ("0.0O1", 2, 3),
               ("0.0L0", 3, 4), ("0.0L1", 4, 5), ("0.0BW0", 5, 8), ("0.0BW1", 8, 11))
    with pytest.raises(ValidationError, match=r"O pipe 0 stage 0 microbatch 1 .* runs at once with O pipe 0 stage 0 "
                                              r"microbatch 0 .* on the device-to-host channel"):
        validate(s)


def test_a_level_above_the_limit_names_the_reload_that_takes_it_there():
    # the second forward's activation, then the first one's back: 2 above a limit of 1.5
    s = _timed(_offloaded(memory=[1.5], M=2), ("0.0FO0", 0, 1), ("0.0O0", 1, 2), ("0.0FO1", 2, 3),
               ("0.0L0", 2.5, 3.5), ("0.0O1", 3, 4), ("0.0BW0", 3.5, 6.5), ("0.0L1", 6.5, 7.5), ("0.0BW1", 7.5, 10.5))
    with pytest.raises(ValidationError, match=r"L pipe 0 stage 0 microbatch 0 .*memory reaches 2, above the limit 1.5"):
        validate(s)


def test_an_offloaded_forward_without_its_copy_back_is_refused():
    s = _timed(_offloaded(), ("0.0FO0", 0, 1), ("0.0O0", 1, 2), ("0.0BW0", 2, 5))
    with pytest.raises(ValidationError, match="L pipe 0 stage 0 microbatch 0 is missing"):
        validate(s)


def test_offload_where_the_problem_has_no_lever_is_refused():
    s = _timed(_offloaded(), ("0.0FO0", 0, 1), ("0.0O0", 1, 2), ("0.0L0", 2, 3), ("0.0BW0", 3, 6))
    plain = replace(s, problem=replace(s.problem, levers=()))
    with pytest.raises(ValidationError, match="kind FO is not allowed"):
        validate(plain)
