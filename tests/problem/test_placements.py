"""Interleaved 1F1B, ZB-V, DualPipe and DualPipeV: validity over a grid and their oracles."""

import pytest
from helpers import uniform

from zbsolve.baselines import applicable, run_baseline
from zbsolve.errors import UsageError
from zbsolve.formats.torch_csv import torch_csv
from zbsolve.schedule.validator import validate

PS = (2, 4, 8)


@pytest.mark.parametrize("P", PS)
@pytest.mark.parametrize("V", (2, 3))
@pytest.mark.parametrize("k", (1, 2, 4))
def test_interleaved_makespan_closed_form(P, V, k):
    M = k * P
    # rank-stage costs F=B=W=V so each chunk costs 1; BW fused
    s = run_baseline("interleaved", uniform(P, M, F=V, B=V, W=V, activation=V, residual=V / 2,
                                            placement=f"interleaved:{V}"))
    validate(s)
    assert s.metrics.makespan == M * 3 * V + (P - 1) * 3 * V / V


def test_interleaved_says_when_m_is_not_a_multiple_of_p():
    problem = uniform(4, 6, placement="interleaved:2")
    assert "interleaved" not in applicable(problem)
    with pytest.raises(UsageError, match=r"multiple of the number of ranks \(4\)"):
        run_baseline("interleaved", problem)


@pytest.mark.parametrize("P", PS)
@pytest.mark.parametrize("M", ("2P-1", "2P", "3P", "4P"))
def test_zb_v_zero_span_bubble_at_one_x(P, M):
    M = {"2P-1": 2 * P - 1, "2P": 2 * P, "3P": 3 * P, "4P": 4 * P}[M]
    s = run_baseline("zb-v", uniform(P, M, F=2, B=2, W=2, activation=2, residual=1, placement="vshape"))
    validate(s)
    assert s.metrics.span_bubble_rate == 0
    assert s.metrics.peak_memory_x == 1.0


@pytest.mark.parametrize("P", PS)
@pytest.mark.parametrize("k", (2, 3, 4))
@pytest.mark.parametrize("overlap", (True, False))
def test_dualpipe_idle_and_memory_oracles(P, k, overlap):
    M = k * P
    s = run_baseline("dualpipe", uniform(P, M, placement="bidirectional", fb_overlap=3 if overlap else None))
    validate(s)
    idle = {s.metrics.makespan - busy for busy in s.metrics.busy}
    if overlap:  # F = B = W = 1, BW = 2, F&B = 3
        assert idle == {(P / 2 - 1) * (3 + 2 - 3 * 1)}
    assert list(s.metrics.peak_memory) == [P + 1.0] * P
    if overlap and k > 2:  # bubble does not grow with M
        smaller = run_baseline("dualpipe", uniform(P, M - P, placement="bidirectional", fb_overlap=3))
        assert {smaller.metrics.makespan - b for b in smaller.metrics.busy} == idle


@pytest.mark.parametrize("P", (2, 4))
@pytest.mark.parametrize("k", (2, 3))
def test_dualpipev_on_p_equals_dualpipe_on_2p(P, k):
    M = k * P
    v = run_baseline("dualpipev", uniform(P, M, F=2, B=2, W=2, activation=2, residual=1,
                                          placement="vshape", fb_overlap=3))
    validate(v)
    d = run_baseline("dualpipe", uniform(2 * P, 2 * M, placement="bidirectional", fb_overlap=3))
    assert v.metrics.makespan == d.metrics.makespan
    assert list(v.metrics.peak_memory) == [2 * P + 1.0] * P  # stage activations of one chunk


def test_dualpipev_torch_csv_has_the_published_order():
    s = run_baseline("dualpipev", uniform(2, 4, F=2, B=2, W=2, activation=2, residual=1,
                                          placement="vshape", fb_overlap=3))
    rank0 = torch_csv(s).splitlines()[0].split(",")
    assert rank0 == [
        "0F0", "0F1", "0F2", "3F0",                      # 1: nF0, 2: nF0F1
        "3I0", "3W0", "3F1",                             # 3: B1 (split), W, F1
        "(0F3;3B1)OVERLAP_F_B", "(3F2;0B0)OVERLAP_F_B",  # 4: F0&B1, F1&B0
        "3B2", "(3F3;0B1)OVERLAP_F_B",                   # 5: B1, F1&B0
        "3B3", "0I2",                                    # 6: B1, B0 split from here
        "0W2", "0I3",                                    # 7: W, B0 (split)
        "0W3",                                           # 8: W
    ]


def test_overlapped_tokens_parse_with_torch():
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    s = run_baseline("dualpipev", uniform(2, 4, placement="vshape", fb_overlap=1.5))
    for row in torch_csv(s).splitlines():
        for token in row.split(","):
            action = schedules._Action.from_str(token)
            assert str(action) == token


def test_placement_baselines_refuse_other_placements():
    assert applicable(uniform(4, 8, placement="vshape")) == ["zb-v", "zb-v-auto", "v-min", "v-half", "dualpipev"]
    assert applicable(uniform(4, 8, placement="bidirectional")) == ["dualpipe"]
    assert applicable(uniform(4, 6, placement="bidirectional")) == []
    with pytest.raises(UsageError, match="needs at least 2P = 8 microbatches"):
        run_baseline("dualpipev", uniform(4, 6, placement="vshape"))
