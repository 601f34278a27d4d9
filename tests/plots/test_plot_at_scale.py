"""Pictures a person reads at P=16 and M=64: panels widen with the ops, the reference goes below
the schedule when wide, labels only where they fit, one memory scale, chunks clearly apart."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from helpers import uniform  # noqa: E402

from zbsolve.baselines import run_baseline  # noqa: E402
from zbsolve.baselines.reference import one_f_one_b_reference  # noqa: E402
from zbsolve.plots.schedule_plot import plot, shade  # noqa: E402


def test_a_large_v_schedule_stacks_its_reference_below_on_one_memory_scale(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    schedule = run_baseline("zb-v", uniform(16, 64, placement="vshape", memory="1x"))
    reference = one_f_one_b_reference(schedule.problem)
    plot(schedule, tmp_path / "big.png", reference=reference)
    fig = figures[0]
    width, _ = fig.get_size_inches()
    assert 12 < width <= 20  # 384 ops a device: wide, and one column
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.get_ylabel() != "device"]
    gantts = [ax for ax in panels if ax.get_title()]
    memories = [ax for ax in panels if ax.get_ylabel().startswith("activation memory")]
    assert [ax.get_title().split(":")[0] for ax in gantts] == ["zb-v", "1f1b"]
    assert gantts[0].get_position().y0 > gantts[1].get_position().y1  # the reference below
    assert len(memories) == 2 and memories[0].get_ylim() == memories[1].get_ylim()
    # microbatch numbers only in bars wide enough for them
    points_per_ms = (width - 1.5) * 72 / (max(s.metrics.makespan for s in (schedule, reference)) * 1.01)
    assert all(0 <= int(text.get_text()) < 64 for ax in gantts for text in ax.texts)
    zb_v_ops = min(t.end - t.start for ops in schedule.devices for t in ops)
    assert zb_v_ops * points_per_ms < 4.2 * 2 + 2 and not gantts[0].texts  # too thin for "63": unlabelled
    assert gantts[1].texts  # 1F1B's fused backward is wide enough


def test_a_small_schedule_keeps_its_reference_beside_it_with_the_same_memory_scale(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    schedule = run_baseline("zb-h2", uniform(4, 8))
    plot(schedule, tmp_path / "small.png", reference=one_f_one_b_reference(schedule.problem))
    fig = figures[0]
    memories = [ax for ax in fig.axes if ax.get_ylabel().startswith("activation memory")]
    assert memories[0].get_position().x1 < memories[1].get_position().x0  # side by side
    assert memories[0].get_ylim() == memories[1].get_ylim()  # ZB-H2 peaks higher: 1F1B's panel follows it
    assert fig.get_size_inches()[0] == 14.0


def test_chunks_differ_in_lightness_by_a_clear_margin():
    for kind in ("F", "B", "W", "BW"):
        first, second = (sum(mcolors.to_rgb(shade(kind, c))) / 3 for c in (0, 1))
        assert second - first > 0.3
