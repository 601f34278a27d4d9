"""Closed forms of docs/design.md, "Hand-made schedules" and hand-checked small schedules."""

from dataclasses import replace
from fractions import Fraction

import pytest
from helpers import uniform

from zbsolve.baselines import applicable, left_out, run_baseline
from zbsolve.errors import UsageError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.schedule.validator import validate

GRID = [(P, M) for P in (2, 3, 4, 8, 16) for M in sorted({1, P - 1, P, 2 * P, 4 * P}) if M >= 1]


def starts(schedule):
    return [[(str(t.op), t.start, t.end) for t in ops] for ops in schedule.devices]


@pytest.mark.parametrize("P, M", GRID)
def test_1f1b_and_gpipe_bubble_and_peaks(P, M):
    problem = uniform(P, M, activation=1.0, residual=0.5)
    for name in ("1f1b", "gpipe"):
        s = run_baseline(name, problem)
        validate(s)
        assert s.metrics.bubble_rate == pytest.approx(float(Fraction(P - 1, M + P - 1)), abs=1e-12)
        assert s.metrics.makespan == (M + P - 1) * 3
    one_f = run_baseline("1f1b", problem)
    assert list(one_f.metrics.peak_memory) == [float(min(P - r, M)) for r in range(P)]
    assert list(run_baseline("gpipe", problem).metrics.peak_memory) == [float(M)] * P


@pytest.mark.parametrize("P, M", [(P, M) for P, M in GRID if M >= P])
def test_zb_h1_idle_per_rank(P, M):
    s = run_baseline("zb-h1", uniform(P, M))
    validate(s)
    idle = [s.metrics.makespan - busy for busy in s.metrics.busy]
    assert idle == [(P - 1) * (1 + 1 - 1)] * P
    assert s.metrics.peak_memory[0] == P  # same as 1F1B on rank 0


@pytest.mark.parametrize("P, M", [(P, M) for P, M in GRID if M >= 2 * P - 1])
def test_zb_h2_zero_span_bubble_and_peak(P, M):
    s = run_baseline("zb-h2", uniform(P, M))
    validate(s)
    assert s.metrics.span_bubble_rate == 0.0
    assert s.metrics.span == 3 * M
    assert s.metrics.peak_memory[0] == 2 * P - 1


def test_issue_examples_p4_m8():
    p = uniform(4, 8)
    assert run_baseline("1f1b", p).metrics.bubble_rate == pytest.approx(3 / 11, abs=1e-15)
    assert run_baseline("zb-h1", p).metrics.makespan == 27
    h2 = run_baseline("zb-h2", p)
    assert (h2.metrics.span, h2.metrics.span_bubble_rate) == (24, 0)


def test_1f1b_p2_m2_by_hand():
    s = run_baseline("1f1b", uniform(2, 2))
    assert starts(s) == [
        [("0.0F0", 0, 1), ("0.0F1", 1, 2), ("0.0BW0", 4, 6), ("0.0BW1", 7, 9)],
        [("0.1F0", 1, 2), ("0.1BW0", 2, 4), ("0.1F1", 4, 5), ("0.1BW1", 5, 7)],
    ]


def test_zb_h1_p2_m2_by_hand():
    s = run_baseline("zb-h1", uniform(2, 2))
    assert starts(s) == [
        [("0.0F0", 0, 1), ("0.0F1", 1, 2), ("0.0B0", 3, 4), ("0.0W0", 4, 5), ("0.0B1", 5, 6), ("0.0W1", 6, 7)],
        [("0.1F0", 1, 2), ("0.1B0", 2, 3), ("0.1F1", 3, 4), ("0.1B1", 4, 5), ("0.1W0", 5, 6), ("0.1W1", 6, 7)],
    ]


def test_comm_delays_cross_device_edges_only():
    s = run_baseline("1f1b", uniform(2, 1, comm=0.5))
    # F0 on rank 0 [0,1]; rank 1 F0 after comm [1.5,2.5]; BW [2.5,4.5]; rank 0 BW after comm [5,7]
    assert starts(s) == [[("0.0F0", 0, 1), ("0.0BW0", 5, 7)], [("0.1F0", 1.5, 2.5), ("0.1BW0", 2.5, 4.5)]]


def test_decimal_costs_are_exact():
    s = run_baseline("zb-h1", uniform(2, 3, F=0.1, B=0.2, W=0.3, comm=0.01))
    for ops in s.devices:
        for t in ops:
            assert repr(t.start) == repr(round(t.start, 6))


def test_baselines_refuse_what_they_do_not_fit():
    assert applicable(uniform(4, 8, placement="vshape")) == ["zb-v", "zb-v-auto", "v-min", "v-half", "dualpipev"]
    assert applicable(uniform(4, 8, split_backward=False)) == ["gpipe", "1f1b"]
    with pytest.raises(UsageError, match="split_backward"):
        run_baseline("zb-h1", uniform(4, 8, split_backward=False))
    for name in ("zb-h9", None, ["1f1b"]):  # not a name at all: was an AttributeError or TypeError
        with pytest.raises(UsageError, match="unknown baseline"):
            run_baseline(name, uniform(4, 8))


def test_over_limit_is_reported_not_dropped():
    s = run_baseline("zb-h2", uniform(4, 8, memory="1x"))
    assert s.over_memory_limit() == [0, 1, 2]


WITH_LEVERS = [("1f1b", "single"), ("zb-h1", "single"), ("interleaved", "interleaved:2"),
               ("interleaved-zb", "interleaved:2"), ("zb-v", "vshape")]  # the schedules made with each lever


def _with_lever(name, placement, lever, **cost):
    """The problem, the named baseline with its lever (validated), and the same one without."""
    problem = build_problem(4, 8, StageCost(2, 2, 1, activation=1, residual=0.5, **cost), placement=placement,
                            levers=(lever,))
    schedule = run_baseline(name, problem)
    validate(schedule)
    return problem, schedule, run_baseline(name[:-2], replace(problem, levers=()))


@pytest.mark.parametrize("name, placement", [(f"{name}-r", placement) for name, placement in WITH_LEVERS])
def test_recomputed_baselines_run_their_schedule_with_every_forward_recomputed(name, placement):
    problem, schedule, plain = _with_lever(name, placement, "recompute", checkpoint=0.1)
    kinds = [t.op.kind for ops in schedule.devices for t in ops]
    assert "F" not in kinds and kinds.count("FC") == kinds.count("R") == sum(len(p.stages) for p in problem.pipes) * 8
    # the same order of forwards and backwards, each R right before its backward
    for ops, plain_ops in zip(schedule.devices, plain.devices):
        ops_kinds = [t.op for t in ops if t.op.kind != "R"]
        assert [op.with_kind("F") if op.kind == "FC" else op for op in ops_kinds] == [t.op for t in plain_ops]
        for before, after in zip(ops, ops[1:]):
            if after.op.kind in ("B", "BW"):
                assert before.op == after.op.with_kind("R")


def test_1f1b_with_recomputation_holds_checkpoints_and_one_whole_activation():
    # device d holds its P - d warm-up checkpoints when the first R takes the rest of one activation
    P, a, c = 4, 1.0, 0.1
    schedule = run_baseline("1f1b-r", build_problem(P, 8, StageCost(1, 1, 1, activation=a, residual=0.5, checkpoint=c),
                                                    levers=("recompute",)))
    assert schedule.metrics.peak_memory == pytest.approx([a + (P - d - 1) * c for d in range(P)])


def test_recomputed_baselines_need_the_lever():
    assert "1f1b-r" not in applicable(build_problem(4, 8, StageCost(1, 1, 1)))


def test_the_pipeoffload_rule_copies_out_in_forward_order_and_back_as_late_as_it_can():
    # 1F1B, P=2, M=3, unit F, BW 2, copies of 1. Device 0: to host after each forward (O2 after
    # F2 ends at 7); back latest first: L2 ends at BW2's start 10, L1 at BW1's 7, L0 at BW0's 4.
    # The last stage runs each backward right after its forward: no room for two copies there.
    problem = build_problem(2, 3, StageCost(1, 1, 1, activation=1, residual=0.5, offload=1), levers=("offload",))
    schedule = run_baseline("1f1b-o", problem)
    validate(schedule)
    copies = {str(t.op): (t.start, t.end) for t in schedule.devices[0] if t.op.kind in ("O", "L")}
    assert copies == {"0.0O0": (1, 2), "0.0O1": (2, 3), "0.0O2": (7, 8),
                      "0.0L0": (3, 4), "0.0L1": (6, 7), "0.0L2": (9, 10)}
    assert not any(t.op.kind in ("FO", "O", "L") for t in schedule.devices[1])
    assert schedule.value == run_baseline("1f1b", replace(problem, levers=())).value == 12


@pytest.mark.parametrize("name, placement", [(f"{name}-o", placement) for name, placement in WITH_LEVERS])
def test_offloading_baselines_keep_their_order_and_times_and_hold_no_more(name, placement):
    _, schedule, plain = _with_lever(name, placement, "offload", offload=0.5)
    assert schedule.offloaded() > 0 and schedule.value == plain.value
    for ops, plain_ops in zip(schedule.devices, plain.devices):
        compute = [(t.op.with_kind("F") if t.op.kind == "FO" else t.op, t.start) for t in ops if t.op.kind not in "OL"]
        assert compute == [(t.op, t.start) for t in plain_ops]
    assert all(a <= b + 1e-9 for a, b in zip(schedule.metrics.peak_memory, plain.metrics.peak_memory))


def test_with_a_limit_the_rule_offloads_the_fewest_chunks_that_fit():
    costs = StageCost(2, 2, 1, activation=1, residual=0.5, offload=0.5)
    loose = build_problem(4, 8, costs, placement="interleaved:2", levers=("offload",), memory="1.5x")
    schedule = run_baseline("interleaved-o", loose)
    assert not schedule.over_memory_limit()
    chunks = {(t.op.stage // 4) for ops in schedule.devices for t in ops if t.op.kind == "O"}
    assert chunks == {0}  # the first chunk's microbatches only


def test_offloading_baselines_need_the_lever():
    plain = build_problem(4, 8, StageCost(1, 1, 1))
    assert "1f1b-o" not in applicable(plain)
    assert not any(name.endswith("-o") for name, _ in left_out(plain))  # not missed where the lever is not allowed
