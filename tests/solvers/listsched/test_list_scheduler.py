"""The memory-aware list scheduler: valid on every placement, never deadlocked, pinned results."""

from dataclasses import replace

import pytest
from helpers import feasible, placed_problems, small_problems, uniform
from hypothesis import given, settings

from zbsolve.baselines import run_baseline
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import load_profile
from zbsolve.schedule.simulator import simulate
from zbsolve.schedule.validator import validate
from zbsolve.solvers import listsched, minimum_memory, solve
from zbsolve.solvers.listsched import solve_list
from zbsolve.solvers.retiming import device_orders
from zbsolve.solvers.settings import RunSettings
from zbsolve.solvers.state import SearchState
from zbsolve.solvers.view import build_view


def list_schedule(problem):
    graph = OpGraph(problem)
    data = build_view(graph, problem.split_backward, problem.objective)
    result = solve_list(data, RunSettings(limit=60.0, deterministic=True), SearchState(data))
    assert result.starts is not None, result.message
    schedule = simulate(graph, device_orders(result, data), "list")
    assert schedule.value <= data.value(result.objective) + 1e-9  # re-timing never delays an op
    return schedule


@settings(max_examples=40, deadline=None)
@given(placed_problems(max_microbatches=6))
def test_every_placement_gets_a_valid_list_schedule_within_memory(problem):
    if feasible(problem):
        validate(list_schedule(problem))  # the validator checks the memory limit too


@settings(max_examples=40, deadline=None)
@given(small_problems(max_devices=6, max_microbatches=12))
def test_single_placement_list_schedules_validate(problem):
    if feasible(problem):
        validate(list_schedule(problem))


@pytest.mark.parametrize("placement, memory", [
    ("single", "1x"), ("vshape", "0.5x"), ("interleaved:2", "1x"), ("bidirectional", "1x"),
])
def test_the_tightest_memory_still_schedules(placement, memory):
    problem = uniform(4, 8, placement=placement, memory=memory, F=1, B=1.5, W=0.5)
    schedule = list_schedule(problem)
    validate(schedule)
    assert schedule.metrics.peak_memory_x <= float(memory[:-1]) + 1e-9


def test_the_1_5b_model_at_1_5x_reaches_its_lower_bound():
    # ZB-H1 (the best hand-made schedule within 1.5x) takes 1310.405 ms; the list
    # scheduler meets the work bound of the busiest device, so the result is proven optimal.
    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(8, 24, profile.rank_costs(8), comm=profile.comm, memory="1.5x")
    assert run_baseline("zb-h1", problem).metrics.makespan == pytest.approx(1310.405)
    solved = solve(problem, "list", time_limit=10, workers=1)
    validate(solved)
    assert solved.metrics.makespan == pytest.approx(1236.541)
    assert (solved.solver.status, solved.solver.bound) == ("optimal", pytest.approx(1236.541))


def v_at(memory):
    profile = load_profile("models/zb-1.5b.json")
    return build_problem(8, 24, profile.rank_costs(8), comm=profile.comm, memory=memory, placement="vshape")


def tight_v():
    return v_at("0.5x")


def test_per_stage_memory_holds_more_microbatches_on_a_tight_v(monkeypatch):
    # At 0.5x a V device holds 8 chunk activations. Reserving both chunks of a microbatch when
    # it enters (which cannot deadlock) admits only 4 at a time: 1842.839 ms. Taking each
    # chunk's memory as its F runs, keeping room for one later chunk, admits 7: 1773.148 ms
    # at in-flight cap 1.0; at cap 0.75 each microbatch's activation is held for less time,
    # and that is what sets the pace here: 1702.0965 ms (without the paced passes).
    monkeypatch.setattr(listsched, "PACES", ())
    # The scheduler's own pass: started from the baselines, V-Min (1657.6225 ms) would win.
    solved = solve(tight_v(), "list", time_limit=10, workers=1, warm_start=False)
    validate(solved)
    assert solved.metrics.makespan == pytest.approx(1702.0965)
    assert solved.solver.message.endswith("cap 0.75, per-stage memory")


def test_pacing_microbatches_into_a_tight_v_beats_every_unpaced_pass(monkeypatch):
    # Admitted as memory allows, microbatches crowd the V's devices and wait on each other,
    # which stretches how long each holds its activations. Let in one every 51.688 ms (1.125 x
    # device 0's 45.945 ms of work per microbatch), each passes through with less waiting:
    # 1531.2775 ms from the pass, 1523.5075 once re-timed, against 1702.0965 unpaced.
    monkeypatch.setattr(listsched, "HEADS", (0,))
    solved = solve(tight_v(), "list", time_limit=10, workers=1)
    validate(solved)
    assert solved.metrics.makespan == pytest.approx(1523.5075)
    assert solved.solver.message.endswith("critical path, cap None, per-stage memory without room kept, "
                                          "a microbatch every 51.688")


def test_letting_the_first_two_microbatches_in_at_once_fills_the_tight_v_sooner():
    # The same pace from microbatch 1 on, with microbatches 0 and 1 both entering at 0:
    # 1479.888 ms from the pass, 1473.676 re-timed.
    solved = solve(tight_v(), "list", time_limit=10, workers=1)
    validate(solved)
    assert solved.metrics.makespan == pytest.approx(1473.676)
    assert solved.solver.message.endswith("backward first, cap None, per-stage memory without room kept, "
                                          "a microbatch every 51.688 after the first 2")


@pytest.mark.parametrize("memory, held", [("0.5x", [3]), ("0.5625x", [4, 3]), ("0.75x", [5]), ("1x", [7])])
def test_tighter_limits_are_whole_microbatches_below_the_limit(memory, held):
    # A V device's microbatch is both its chunks' activation: 1x holds 8 of them (a rank's
    # activation times P), 0.5x 4, 0.5625x 4.5.
    def limits(memory):
        problem = v_at(memory)
        return build_view(OpGraph(problem), problem.split_backward, problem.objective)

    data, full = limits(memory), limits("1x").memory_limit
    microbatch = full[0] // 8
    assert full == [8 * microbatch] * 8
    assert listsched.tighter_limits(data, listsched.layout(data)) == [[n * microbatch] * 8 for n in held]


def test_a_tighter_limit_keeps_a_looser_v_from_crowding(monkeypatch):
    # At 0.75x (6 microbatches) the best pass under the limit takes 1347.1645 ms re-timed; the
    # same pass held to 5 microbatches (0.625x) takes 1339.7675, what it takes at 0.625x itself.
    def listed(memory):
        solved = solve(v_at(memory), "list", time_limit=10, workers=1)
        validate(solved)
        return solved

    assert listed("0.625x").metrics.makespan == pytest.approx(1339.7675)
    tighter = listed("0.75x")
    assert tighter.metrics.makespan == pytest.approx(1339.7675)
    assert "held below the memory limit" in tighter.solver.message
    monkeypatch.setattr(listsched, "TIGHTER_STEPS", ())
    assert listed("0.75x").metrics.makespan == pytest.approx(1347.1645)


@settings(max_examples=40, deadline=None)
@given(placed_problems(max_microbatches=6, memory=False))
def test_every_placement_gets_a_list_schedule_at_the_least_memory_that_admits_one(problem):
    # Two pipes at this limit cannot hold a microbatch of each on a device at once: passes
    # that reserve memory per device could then all deadlock (each pipe filling a device
    # the other needs next); those that reserve across the pipe cannot.
    tightest = replace(problem, memory_limit=tuple(minimum_memory(problem)))
    validate(list_schedule(tightest))


def test_two_pipes_below_two_microbatches_reserve_across_the_pipe():
    # Found by a random search: every pass reserving memory per device deadlocked here, and
    # the solve answered "no schedule found" (CBC too, with no warm start), though running
    # microbatches one at a time fits. 4.5 holds one activation of 4 per device.
    costs = [StageCost(2.544, 1.025, 2.191, 4.0, 2.0), StageCost(2.544, 1.025, 2.191, 4.0, 1.0)]
    problem = build_problem(2, 10, costs, placement="bidirectional", memory=(4.5, 4.5))
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    assert listsched.crowded(data, listsched.layout(data))
    schedule = solve(problem, "list", time_limit=5, workers=1)
    validate(schedule)
    # CP-SAT proves 84.065 optimal here (a 5 s solve, 2026-11-26); the list schedule meets it.
    assert schedule.metrics.makespan == pytest.approx(84.065)


def paired_profile_problem(model: str, fb_overlap: float, **options):
    profile = load_profile(f"models/{model}.json")
    return build_problem(profile.devices, profile.microbatches, profile.rank_costs(profile.devices),
                         comm=profile.comm, placement="bidirectional", fb_overlap=fb_overlap,
                         time_unit=profile.time_unit, **options)


def test_a_device_waits_for_a_pair_partner_when_the_pair_still_ends_first(monkeypatch):
    """1.5B with F&B pairs (576 ops): pairing only ops ready at one moment gives 1104.915 ms,
    behind DualPipe's 1092.687; waiting for a partner that is ready soon enough gives
    1069.361, with more pairs."""
    problem = paired_profile_problem("zb-1.5b", 36.756)
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    result = solve_list(data, RunSettings(limit=60.0, deterministic=True), SearchState(data))
    assert data.value(result.objective) == pytest.approx(1069.361)
    assert len(result.pairs) == 68
    assert list_schedule(problem).value == pytest.approx(1069.361)
    assert run_baseline("dualpipe", problem).value == pytest.approx(1092.687)
    monkeypatch.setattr(listsched.ListRun, "_partner_worth_waiting_for", lambda *args: None)
    result = solve_list(data, RunSettings(limit=60.0, deterministic=True), SearchState(data))
    assert data.value(result.objective) == pytest.approx(1104.915)
    assert len(result.pairs) == 42


def test_a_shorter_starting_schedule_is_returned_and_said_to_be():
    """1.5B with pairs at 1.125x: DualPipe (1092.687 ms) fits exactly; the list scheduler's
    best pass gives 1152.422. The answer is DualPipe's, and its note says so."""
    problem = paired_profile_problem("zb-1.5b", 36.756, memory="1.125x")
    solved = solve(problem, "list", time_limit=5, workers=1)
    assert solved.value == pytest.approx(1092.687)
    assert solved.solver.message.startswith("list scheduler, best of")
    assert solved.solver.message.endswith("; the starting schedule (dualpipe) is shorter and is returned")
