"""Lower bounds (Jackson, memory warm-up and cool-down) against exact optima."""

import pytest
from brute_force import brute_force_makespan
from exact_model import plain_optimum, plain_solve
from helpers import tiny_pair_problems, tiny_problems, uniform
from hypothesis import HealthCheck, event, given, settings

from zbsolve.problem.op_graph import Op, OpGraph
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate
from zbsolve.solvers import bounds, solve
from zbsolve.solvers.bounds.fill import most_held
from zbsolve.solvers.view import build_view


def bound_of(problem) -> float:
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    return data.value(bounds.lower_bound(data))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_problems())
def test_the_bound_never_exceeds_the_exact_optimum(problem):
    # Most tiny problems are proven in well under a second; a few span problems are not proven
    # within the limit on a slow machine. The optimum is at most the best schedule found, so a
    # valid bound stays at or below that value either way.
    best, proven = plain_solve(problem, time_limit=10)
    assert best is not None, "tiny problems always have a schedule within the time limit"
    event("proven optimal" if proven else "best found, not proven")
    assert bound_of(problem) <= best + 1e-9


@pytest.mark.parametrize("P, M, memory, optimum", [
    (2, 4, "1x", 13.1), (3, 3, "1x", 11.7), (3, 6, "1x", 20.4),
])
def test_memory_bounds_meet_small_optima(P, M, memory, optimum):
    # The work bound alone gives M(F+B+W) + warm-up; warm-up and cool-down idle close the gap.
    problem = uniform(P, M, memory=memory, F=1, B=1.2, W=0.7)
    assert plain_optimum(problem) == pytest.approx(optimum)
    assert bound_of(problem) == pytest.approx(optimum)


def zb_1_5b_span(memory: str):
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    return build_problem(profile.devices, profile.microbatches, profile.rank_costs(profile.devices),
                         comm=profile.comm, memory=memory, objective="span", time_unit=profile.time_unit)


def test_span_bound_includes_the_cool_down():
    # At 1x the first device's span is its work plus warm-up and cool-down idle, which is
    # exactly ZB-H1's 1310.405 ms for the 1.5B profile: the solve is proven at once.
    assert bound_of(zb_1_5b_span("1x")) == pytest.approx(1310.405)


def test_cool_down_on_a_v_device_counts_both_stages_of_the_last_microbatch():
    # V-shape P=4 M=4, F=B=W=1 per rank-stage (0.5 per stage), comm 0.5, 0.5x memory: 4 stage
    # activations per device. Device 3 (stages 3 and 4) does 12 of work and idles 8 before its
    # first backward. Its last F is a stage-4 F; that microbatch goes through stages 5-7 and back
    # (3 F, 3 B, 6 hops: 6) before its B here, holding both its activations here meanwhile, and
    # then needs 4.5 more (B and B here, three B and hops to device 0, its W): 10.5 after the F.
    # Only its own B, B, W, W (2) and what the other two activations offer (two B+W, 2) can run
    # here in that time: 6.5 idle, 26.5 in all, the optimum. Counting only the wait for its
    # backward (6 - 2) gave 24; before that, the cool-down ran on one-stage devices only (23).
    problem = uniform(4, 4, placement="vshape", memory="0.5x", comm=0.5)
    assert plain_optimum(problem) == pytest.approx(26.5)
    assert bound_of(problem) == pytest.approx(26.5)


def test_cool_down_takes_the_least_over_stages_whose_f_may_come_last():
    # DualPipe's placement, P=4 M=4, F=B=W=1, comm 0.5, 0.5x (2 activations per device). Device 1
    # (stage 1 of pipe 0, stage 2 of pipe 1) idles 5 before its first backward. If pipe 0's F comes
    # last, its microbatch needs 9.5 after it (round trip, its B here, stage 0's B and W), which
    # its own B and W (2) and one held B+W (2) fill but for 5.5; if pipe 1's, 8 (round trip 3,
    # its B here, stages 1 and 0 on the other side, stage 0's W) less 4: 4. Either can be last,
    # so 12 + 5 + 4 = 21, the optimum. Counting only the round trip gave 18, and 17 before the
    # least over both stages.
    problem = uniform(4, 4, placement="bidirectional", memory="0.5x", comm=0.5)
    assert plain_optimum(problem) == pytest.approx(21)
    assert bound_of(problem) == pytest.approx(21)


def test_cool_down_lifts_the_vshape_half_memory_bound():
    # 1.5B at 0.5x on a V: the middle device's cool-down adds to its warm-up (1252.690 before,
    # 1306.963 when the cool-down counted only the wait for the last F's own backward, not the
    # 67.5 ms its backward still needs on the way back to device 0).
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(profile.devices, profile.microbatches, profile.rank_costs(profile.devices),
                            comm=profile.comm, placement="vshape", memory="0.5x", time_unit=profile.time_unit)
    assert bound_of(problem) == pytest.approx(1369.8025)


def test_memory_forces_idle_between_warm_up_and_cool_down(monkeypatch):
    # V-shape P=2 M=4, F=B=W=1 per rank (0.5 per stage), comm 0, 0.5x: each device holds one
    # microbatch (two stage activations of 0.5 in 1.0). Device 1 (stages 1 and 2) can take the
    # next microbatch's F only after the last one's stage-2 B has ended, and between its stage-2 F
    # and that B device 0 runs stage 3's F and B (1) while device 1 has nothing it may run: for
    # microbatches 1 and 2 (the windows between warm-up and cool-down) 2 of idle on top of
    # the warm-up (1.5) and cool-down (1): 14.5 before, 16.5 now, the optimum. (At M=5, three
    # windows: 17.5 before, 20.5 now and optimal, proven in 26 s instead of 6.)
    problem = uniform(2, 4, placement="vshape", memory="0.5x")
    assert plain_optimum(problem) == pytest.approx(16.5)
    assert bound_of(problem) == pytest.approx(16.5)
    with monkeypatch.context() as patched:
        patched.setattr(bounds.memory, "middle_idle", lambda *args, **kwargs: 0.0)
        assert bound_of(problem) == pytest.approx(14.5)


@pytest.mark.parametrize("M, bound, optimum", [(6, 413.1835, 420.1165), (8, 517.6465, 531.5125),
                                                (12, 726.5725, 754.304)])
def test_middle_idle_on_a_small_v_at_half_memory(M, bound, optimum):
    # 1.5B costs on a V at P=4, 0.5x (the bound-gap suite). The middle device holds two
    # microbatches; in each window the trip through devices 2 to 0 and back (58.518 ms) exceeds
    # what it may run (one other microbatch's work, 45.945 ms) by 12.573 ms, for one, two and
    # four windows. These are the optima of that device's relaxation (a study of the
    # one-device relaxation, since removed: 413.1835, 517.65 and 726.57), still below the optima zbsolve
    # proved before: 400.6105, 492.5005 and 676.2805 before.
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(4, M, profile.rank_costs(4), comm=profile.comm, placement="vshape", memory="0.5x")
    assert bound_of(problem) == pytest.approx(bound)
    assert bound < optimum


@pytest.mark.parametrize("P, M, F, B, W, optimum", [
    # By hand: the first device starts F(0) at 0; the second runs F(0) F(1) B(0) B(1) or
    # F(0) B(0) F(1) B(1), 4 units from 1 at the earliest, and the first device's B(1) and
    # W(1) follow the last of them: 1 + 4 + 1 + 0.2. Its own work (4.4) bounds it at 5.4.
    (2, 2, 1, 1, 0.2, 6.2),
    (2, 3, 1, 1.2, 0.7, 9.5),
    (3, 4, 1, 2, 0.5, 18.5),
])
def test_span_bound_counts_the_work_of_other_devices_in_between(P, M, F, B, W, optimum):
    problem = uniform(P, M, F=F, B=B, W=W, objective="span")
    assert plain_optimum(problem) == pytest.approx(optimum)
    assert bound_of(problem) == pytest.approx(optimum)


@pytest.mark.parametrize("P, M, memory, optimum", [
    # By hand (P=2 M=2, each chunk 0.5 per op): device 0 runs F of stage 0 for both microbatches
    # by 1, F of stage 2 at 1 and 1.5 (after stage 1's), and its first backward waits for
    # stages 3's F and B: idle from 2 to 2.5 on top of its 6 of work. Counted from stage 2's F
    # as if it could come first, the bound was 6.0, 9.0 and 12.0.
    (2, 2, None, 6.5), (3, 3, None, 10.0), (2, 4, "1x", 12.5),
])
def test_interleaved_span_bound_counts_from_the_first_stage_forward(P, M, memory, optimum):
    problem = uniform(P, M, placement="interleaved:2", memory=memory, objective="span")
    assert plain_optimum(problem) == pytest.approx(optimum)
    assert bound_of(problem) == pytest.approx(optimum)


@pytest.mark.parametrize("placement, memory, objective, bound", [
    # 1.5B costs, P=8 M=16. Interleaved:2 span at 1x: the makespan's bound, where counting
    # from stage 8's F gave 743.1415. Single at 1.1x (8.8 activations, 8 fit): the optimum a
    # 15 s solve proves, where 8.8 F's in the warm-up gave 909.354.
    ("interleaved:2", "1x", "span", 819.6645),
    ("single", "1.1x", "makespan", 924.171),
])
def test_profile_bounds_that_whole_counts_and_first_forwards_raised(placement, memory, objective, bound):
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(8, 16, profile.rank_costs(8), comm=profile.comm, memory=memory, placement=placement,
                            objective=objective, time_unit=profile.time_unit)
    assert bound_of(problem) == pytest.approx(bound)


@pytest.mark.parametrize("placement, split, starting_before, ending_after", [
    # On a V every op of the last device follows an F of each device before it, and its W's
    # lead nowhere; a fused BW leads down to device 0; DualPipe's pipes start at either end.
    ("vshape", True, [[0], [0, 1], [0, 1, 2]], [[0], [1], [2]]),
    ("single", False, [[0], [0, 1], [0, 1, 2]], [[0], [0, 1], [0, 1, 2]]),
    ("bidirectional", True, [[0], [1]], [[0], [1]]),
])
def test_devices_whose_span_starts_before_or_ends_after(placement, split, starting_before, ending_after):
    problem = uniform(2 if placement == "bidirectional" else 3, 4, placement=placement, split_backward=split,
                      objective="span")
    paths = bounds.Paths(build_view(OpGraph(problem), split, "span"))
    assert [paths.starting_before(d) for d in range(problem.devices)] == starting_before
    assert [paths.ending_after(d) for d in range(problem.devices)] == ending_after


def test_vshape_span_bound_follows_the_backwards_to_device_0():
    # 1.5B costs, P=8 M=16, V-shape at 0.75x. Device 0 starts no later than the turn device,
    # so the turn device's span holds its ops and the paths of their backwards on to device
    # 0's end: its makespan bound (the cool-down, 910.3525 ms) less the least wait for its
    # first F, 7 chunk F's and comm (7 x 9.862). Measured on its own ops' ends it was 786.802.
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")

    def bound(objective):
        return bound_of(build_problem(8, 16, profile.rank_costs(8), comm=profile.comm, memory="0.75x",
                                      placement="vshape", objective=objective, time_unit=profile.time_unit))

    assert bound("makespan") == pytest.approx(910.3525)
    assert bound("span") == pytest.approx(910.3525 - 7 * (18.522 / 2 + 0.601))


def test_span_bound_proves_the_zero_bubble_2x_span():
    # 1.5B at 2x: the first device's span is at least the last stage's head (7 F and comm),
    # its 24 F and 24 B, the backward chain back to the first (7 comm and 7 B), then W: 1152.599 ms,
    # the span the solver finds; the devices' own work (1102.68) was the bound before.
    assert bound_of(zb_1_5b_span("2x")) == pytest.approx(1152.599)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(tiny_pair_problems())
def test_the_bound_with_pairs_never_exceeds_the_best_pairing(problem):
    # Exhaustive over every order and pairing, so the bound is checked against the true optimum,
    # including pairs shorter than their halves (where some relaxations must stand aside).
    best = brute_force_makespan(problem)
    assert best is not None
    assert bound_of(problem) <= best + 1e-9


def zb_1_5b_dualpipe():
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    return build_problem(profile.devices, profile.microbatches, profile.rank_costs(profile.devices),
                         comm=profile.comm, placement="bidirectional", fb_overlap=36.756,
                         time_unit=profile.time_unit)


def test_pair_relaxations_tighten_the_bidirectional_bound(monkeypatch):
    # 1.5B costs on DualPipe's placement, pairs of 36.756 ms (F + B + W = 45.945): charging each
    # pair's saving to the F or to the W keeps the warm-up's forwards or the cool-down's backwards
    # at full length, where subtracting every possible saving at the end (939.513) does not.
    monkeypatch.setattr(bounds.jackson, "_pair_count_bound", lambda data, ops, head, tail, full, most: 0)
    assert bound_of(zb_1_5b_dualpipe()) == pytest.approx(992.022)


def test_pair_count_bound_on_the_bidirectional_profile():
    # The middle devices can pair nothing before their first backward may start (208.444 ms) nor
    # after the last forward's path back (206.264 ms): sixteen pairs, eight forwards unpaired in
    # the warm-up and eight backwards in the cool-down are the best trade, 1015.924 ms.
    assert bound_of(zb_1_5b_dualpipe()) == pytest.approx(1015.924)


def test_pair_count_bound_by_hand():
    # P=2, M=2, F=B=W=1, pairs of 1.5 (saving 1.5 each). Device 0's first backward may start at
    # 2 (its pipe-1 stage after two forwards) and every forward needs 2 more after it ends, so a
    # pair ends no earlier than 3.5 and the step no earlier than 5.5; with no pair the device's
    # work alone is 6. The exhaustive search finds 6: pairs do not pay here.
    problem = uniform(2, 2, F=1, B=1, W=1, placement="bidirectional", fb_overlap=1.5)
    assert bound_of(problem) == pytest.approx(5.5)
    assert brute_force_makespan(problem) == pytest.approx(6.0)


def test_memory_edges_on_a_device_with_two_stages():
    # Uniform costs on the V: P=4 gives chunks of activation 0.5, 0.5x a limit of 2, room for
    # four chunks. Device 0 holds stages 0 and 7. When the F of stage 7, microbatch j starts,
    # j holds both chunks (1); each earlier microbatch whose stage-0 backward has not ended
    # holds 0.5 more, so three of them (j-3 .. j-1) would be over: B(stage 0, j-3) ends first.
    # Each whose stage-7 backward has not ended holds both chunks: B(stage 7, j-2) ends first.
    problem = uniform(4, 4, placement="vshape", memory="0.5x")
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    implied = {(a, b) for a, b, _ in data.implied}
    assert (Op("B", 0, 0, 0), Op("F", 0, 7, 3)) in implied
    assert (Op("B", 0, 0, 1), Op("F", 0, 7, 3)) not in implied  # two earlier ones still fit
    assert (Op("B", 0, 7, 1), Op("F", 0, 7, 3)) in implied
    assert (Op("B", 0, 7, 2), Op("F", 0, 7, 3)) not in implied
    assert (Op("B", 0, 0, 0), Op("F", 0, 0, 3)) not in implied  # stage 0 alone: four fit


def test_memory_edges_wait_for_the_residual():
    # P=2, unit costs, activation 1, residual 0.5, limit 0.5x = one activation: the F of
    # microbatch j on device 0 waits for j-1's B there (k = 1), and since j-1's residual would
    # not fit beside j's activation, also for j-1's W (or j's own B, which comes later): one
    # more unit. Device 0's cycle is then F0 F1 B1 B0 W0, 5 per microbatch, and the bound meets
    # the optimum; without the delay it was 4M + 1 (17 at M=4).
    problem = uniform(2, 4, memory="0.5x")
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    delays = {(a, b): data.value(delay) for a, b, delay in data.implied}
    assert delays[(Op("B", 0, 0, 2), Op("F", 0, 0, 3))] == pytest.approx(1)
    assert delays[(Op("F", 0, 0, 2), Op("F", 0, 0, 3))] == 0  # microbatch order alone
    assert bound_of(problem) == pytest.approx(20)
    assert plain_optimum(problem) == pytest.approx(20)


def test_memory_edges_raise_the_vshape_bound(monkeypatch):
    # 1.5B costs, P=4, M=4, V at 0.5x: 253.362 ms with memory edges only on one-stage devices,
    # 262.482 with them on every device (the cool-down and area bounds left out), 308.7205 with
    # the cool-down: the optimum, proven by tests/exact_model.py (113 s, so not run here).
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(4, 4, profile.rank_costs(4), comm=profile.comm, placement="vshape", memory="0.5x",
                            time_unit=profile.time_unit)
    assert bound_of(problem) == pytest.approx(308.7205)
    monkeypatch.setattr(bounds, "cooldown_bound", lambda data, ops, head=None, tail=None: 0)
    monkeypatch.setattr(bounds, "area_bound", lambda data, ops, floor=0: 0)
    assert bound_of(problem) == pytest.approx(262.4815)


def test_pair_models_keep_memory_edges_to_one_stage_devices():
    # On DualPipe's placement every device holds two stages; with F&B pairs the memory edges
    # slowed the search and moved no bound, so only the microbatch-order chains remain.
    def memory_edges(fb_overlap):
        problem = uniform(4, 8, placement="bidirectional", memory="0.5x", fb_overlap=fb_overlap)
        implied = build_view(OpGraph(problem), problem.split_backward, problem.objective).implied
        return [(a, b) for a, b, _ in implied if a.kind != b.kind]

    assert memory_edges(None)
    assert memory_edges(2.4) == []


def test_the_bound_takes_the_memory_edges_pair_models_leave_out(monkeypatch):
    # Two stages per device at 0.625x (one microbatch's activations of both stages fit, and
    # one more stage's): the models leave the memory edges out with F&B pairs, the static
    # bound takes them, and meets the optimum that the plain model proves. Without them the
    # area bound gives 19 of it (16 when it took the limit's 2.5 chunk activations for held,
    # where 2 fit), the others 12.5.
    problem = uniform(2, 3, F=2, B=1, W=1, placement="interleaved:2", memory="0.625x", fb_overlap=1.5,
                      split_backward=False)
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    assert not [(a, b) for a, b, _ in data.implied if a.kind != b.kind]
    assert data.value(bounds.own_bound(data)) == pytest.approx(19.0)
    with monkeypatch.context() as patch:
        patch.setattr(bounds, "area_bound", lambda data, ops, floor=0: 0)
        assert data.value(bounds.own_bound(data)) == pytest.approx(12.5)
    assert bound_of(problem) == pytest.approx(20.0)
    assert plain_solve(problem, time_limit=60, workers=1) == (pytest.approx(20.0), True)  # ~5 s; 2 workers took longer


def test_stays_that_memory_keeps_apart_bound_the_span():
    # DualPipe's placement on 2 devices, limit 5 with activations 3 and 4: no two microbatches,
    # of either pipe, fit on a device together. Device 0's stays: pipe 0's microbatches 0.6 +
    # 0.5 + 0.1 + 5.2 + 0.5 + 2.1 = 9.0 each, pipe 1's 0.1 + 5.2 = 5.3 each, 28.6 in all; the
    # bound was 18.0 (a random soundness draw), the optimum 31.6.
    costs = [StageCost(0.6, 0.3, 1.8, 3, 1.2), StageCost(0.1, 2.6, 2.6, 4, 4.0)]
    problem = build_problem(2, 4, costs, placement="bidirectional", comm=0.5, memory=5.0,
                            split_backward=False, objective="span")
    assert problem.memory_limit == (5.0, 5.0)
    assert bound_of(problem) == pytest.approx(28.6)
    assert plain_solve(problem, time_limit=60, workers=1) == (pytest.approx(31.6), True)
    makespan = build_problem(2, 4, costs, placement="bidirectional", comm=0.5, memory=5.0,
                             split_backward=False)
    data = build_view(OpGraph(makespan), makespan.split_backward, makespan.objective)
    assert data.value(bounds.stays_bound(data, data.device_ops[0])) >= 28.6
    assert bound_of(makespan) <= plain_solve(makespan, time_limit=60, workers=1)[0] + 1e-9


@pytest.mark.parametrize("objective, per_device", [("span", [12, 6]), ("makespan", [13, 13])])
def test_stays_one_at_a_time(objective, per_device):
    """P=2 M=3, F=B=W=1, a limit of 1.5 activations: each device holds one microbatch at a
    time. Device 0's stays last F0 + F1 + B1 + B0 = 4, device 1's F1 + B1 = 2. Span: their
    sums, 12 and 6. Makespan: device 0 runs its three back to back from 0 and then W0 (13);
    device 1's F of microbatch i follows device 0's B of microbatch i - 1, so its stays
    start no earlier than 1, 5 and 9, and B0 and W0 follow the last (9 + 2 + 2 = 13)."""
    problem = uniform(2, 3, memory=[1.5, 1.5], objective=objective)
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    assert [data.value(bounds.stays_bound(data, data.device_ops[d])) for d in range(2)] == per_device


@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_a_long_pipeline_bounds_a_sample_of_its_devices(monkeypatch, objective):
    # P = 1000, M = 2 took a minute (ten at span) of bounds before any solving: every device
    # walked all ops. Above the work budget a sample of devices is bounded, ends included.
    problem = uniform(12, 2, memory="1x", objective=objective, F=1.0, B=2.0, W=1.5)
    data = build_view(OpGraph(problem), True, objective)
    assert bounds.bounded_devices(data) == list(range(12))
    full = data.value(bounds.lower_bound(data))
    monkeypatch.setattr(bounds, "DEVICE_BOUND_WORK", 1)
    sample = bounds.bounded_devices(data)
    assert sample == [0, 11]  # a room of two: the ends
    monkeypatch.setattr(bounds, "DEVICE_BOUND_WORK", 4 * max(len(data.ops), 3 * 3 * 12))
    sample = bounds.bounded_devices(data)
    assert 0 in sample and 11 in sample and 2 < len(sample) < 12
    assert data.value(bounds.lower_bound(data)) <= full
    assert data.value(bounds.lower_bound(data)) >= 2 * (1.0 + 2.0 + 1.5)  # a device's own work still counts


@pytest.mark.parametrize("objective, expected", [("makespan", 10.0), ("span", 9.0)])
def test_area_bound_by_hand(objective, expected):
    # P=2, M=4, F = B = W = 1, activation 1, limit 2 (1x): device 0 holds each microbatch
    # from its F to its B there, F0 F1 B1 B0: 4, so 16 of memory-time in all. By time t at
    # most floor(t) + 1 F's have started (1 held in [0, 1)); the last B ends by T - 1 (its W
    # follows), the one before by T - 2, so 1 is held in [T - 2, T - 1) and none after.
    # Memory-time 1 + 2 (T - 3) + 1 = 2T - 4 >= 16: T >= 10. For its span the device counts
    # from its first op to its last: 1 + 2 (T - 2) + 1 = 2T - 2 >= 16, T >= 9.
    problem = uniform(2, 4, memory="1x", objective=objective)
    data = build_view(OpGraph(problem), problem.split_backward, problem.objective)
    assert data.value(bounds.area_bound(data, data.device_ops[0])) == expected
    assert bounds.area_bound(data, data.device_ops[0]) <= bounds.lower_bound(data)  # others prove 13 here


def test_area_bound_lifts_interleaved_at_half_memory(monkeypatch):
    # 1.5B interleaved:2 at 0.5x: device 0 holds 4 microbatches (both chunks), each of whose
    # first chunk stays 310.9 ms (16 F, 16 B and 30 comm through the pipe and back). A 60 s
    # solve found 1705 ms and reported a bound of 1407.48.
    from zbsolve.problem.profiles import load_profile

    profile = load_profile("models/zb-1.5b.json")
    problem = build_problem(profile.devices, profile.microbatches, profile.rank_costs(profile.devices),
                            comm=profile.comm, memory="0.5x", placement="interleaved:2",
                            time_unit=profile.time_unit)
    assert bound_of(problem) == pytest.approx(1465.9525)
    # 0.55x holds 8.8 of device 0's chunk activations, but only 8 fit at once: the same bound
    # (the limit itself gave 1361.668).
    roomier = build_problem(profile.devices, profile.microbatches, profile.rank_costs(profile.devices),
                            comm=profile.comm, memory="0.55x", placement="interleaved:2",
                            time_unit=profile.time_unit)
    assert bound_of(roomier) == pytest.approx(1465.9525)
    monkeypatch.setattr(bounds, "area_bound", lambda data, ops, floor=0: 0)
    assert bound_of(problem) == pytest.approx(1371.0045)


@pytest.mark.parametrize("limit, sizes, held", [
    (64, [10] * 8, 60),  # 6.4 of one size: 6 fit
    (64, [10] * 4, 40),  # all of them
    (7, [3, 3, 5], 6),  # 3 + 3; 5 alone or with a 3 leaves more room or does not fit
    (8, [3, 3, 5], 8),  # 3 + 5
    (11, [4, 4, 4, 6, 6], 10),
])
def test_most_held_is_the_fullest_set_of_activations_within_the_limit(limit, sizes, held):
    assert most_held(limit, sizes) == held


@pytest.mark.parametrize("P, M, optimum", [
    # P=3 at 0.8x: the limit holds 2.4 activations, so 2 F's (not 2.4) fill the wait for the
    # first backward and the windows after it. Counting 2.4 the bounds were 17.1 and 24.6.
    (3, 4, 17.5),
    (4, 6, 24.8),
])
def test_memory_bounds_count_whole_forwards(P, M, optimum):
    problem = uniform(P, M, memory="0.8x", F=1, B=1.2, W=0.7)
    assert plain_optimum(problem) == pytest.approx(optimum)
    assert bound_of(problem) == pytest.approx(optimum)


@pytest.mark.parametrize("M, split, objective, comm, costs, others, area, optimum", [
    (2, False, "span", 0.5, [(1.8, 1.5, 0.6, 2, 0.8), (0.9, 1.0, 0.2, 1, 0.25)], 7.0, 8.1, 9.4),
    (4, True, "span", 0.5, [(1.6, 2.9, 0.6, 2, 0.8), (1.0, 2.5, 0.7, 1, 0.5)], 19.2, 21.5, 28.2),
    (4, False, "span", 0.0, [(2.2, 2.5, 2.3, 4, 0), (1.2, 2.1, 1.2, 1, 0)], 23.0, 25.3, 37.2),
    (4, False, "makespan", 0.5, [(2.2, 1.0, 1.6, 4, 2.0), (2.8, 0.4, 2.9, 1, 1.0)], 23.8, 26.9, 39.5),
])
def test_where_the_area_bound_binds_it_stays_below_the_optimum(monkeypatch, M, split, objective, comm, costs,
                                                                 others, area, optimum):
    # Drawn by a random soundness generator (21 of 4,000 problems where the area bound is
    # the highest); the plain model proves each optimum in about a second.
    problem = build_problem(2, M, [StageCost(*c) for c in costs], placement="bidirectional", comm=comm,
                            memory="0.5x", split_backward=split, objective=objective)
    assert bound_of(problem) == pytest.approx(area)
    assert plain_solve(problem, time_limit=60, workers=1) == (pytest.approx(optimum), True)
    monkeypatch.setattr(bounds, "area_bound", lambda data, ops, floor=0: 0)
    assert bound_of(problem) == pytest.approx(others)


def test_a_device_whose_stage_holds_nothing_keeps_its_memory_bounds():
    """Activation 0 on device 0 (under a limit it never reaches) and room for one
    microbatch on device 1: the memory bounds count no microbatches of a zero activation
    (no division by it), and the solve proves the plain model's optimum, 20, where the
    problem without a limit takes 19."""
    costs = [StageCost(1, 1, 1, 0, 0), StageCost(1, 1, 1, 2, 1)]
    limited = build_problem(2, 6, costs, memory=(1.0, 2.0))
    solved = solve(limited, "cpsat", time_limit=10, workers=1)
    validate(solved)
    assert (solved.solver.status, solved.metrics.makespan) == ("optimal", 20)
    assert plain_optimum(limited) == 20
    assert solve(build_problem(2, 6, costs), "cpsat", time_limit=10, workers=1).metrics.makespan == 19
