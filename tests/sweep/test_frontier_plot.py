"""The frontier picture: a marker per placement in the legend, points at one spot drawn apart,
each solved point's bound drawn."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from zbsolve.sweep.frontier import Frontier, FrontierPoint  # noqa: E402
from zbsolve.sweep.frontier_plot import dodged, plot_frontier  # noqa: E402


def point(placement, peak, value, bound):
    return FrontierPoint(placement, 8, 24, "1x", "makespan", peak, value, bound, (value - bound) / value,
                         "feasible", None, on_placement_frontier=True)


ONE_LIMIT = Frontier(
    points=[point("single", 27.2, 1310.0, 1300.0), point("interleaved:2", 27.2, 1219.0, 1188.0),
            point("vshape", 27.2, 1188.0, 1188.0)],
    baselines=[{"name": "zb-v", "peak": 27.2, "value": 1188.0}, {"name": "1f1b", "peak": 27.2, "value": 1457.0}],
    per_microbatch=False, time_unit="ms", memory_unit="GB")


def test_points_within_a_marker_spread_apart_in_order_and_others_stay():
    xs = dodged([(27.2, 1188.0), (27.21, 1188.5), (12.0, 1600.0)], x_span=16.0, y_span=500.0)
    assert xs[2] == 12.0
    assert xs[0] < xs[1] and abs((xs[1] - xs[0]) - 0.025 * 16.0) < 1e-9
    assert abs((xs[0] + xs[1]) / 2 - 27.205) < 1e-9


def test_a_one_limit_frontier_shows_every_placement_apart_with_its_bound(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_frontier(ONE_LIMIT, tmp_path / "f.png")
    ax = figures[0].axes[0]
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:3] == ["single (solved)", "interleaved:2 (solved)", "vshape (solved)"]
    markers = [h.get_marker() for h in legend.legend_handles[:3]]
    assert len(set(markers)) == 3 and "None" not in markers and "" not in markers
    drawn = [(line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines if line.get_marker() in markers]
    drawn += [tuple(xy) for c in ax.collections if hasattr(c, "get_offsets") and not hasattr(c, "get_segments")
              for xy in c.get_offsets()]
    assert len(drawn) == 5
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    shown = [((x - x0) / (x1 - x0), (y - y0) / (y1 - y0)) for x, y in drawn]
    for i, a in enumerate(shown):  # vshape and zb-v, both 1188 ms at 27.2 GB, no longer hide each other
        for b in shown[i + 1:]:
            assert abs(a[0] - b[0]) > 0.01 or abs(a[1] - b[1]) > 0.01
    whiskers = [seg for c in ax.collections if hasattr(c, "get_segments") for seg in c.get_segments()]
    spans = sorted((round(min(s[:, 1]), 6), round(max(s[:, 1]), 6)) for s in whiskers if len(s) == 2)
    assert (1188.0, 1219.0) in spans and (1300.0, 1310.0) in spans  # value down to the proven bound
    assert "drawn side by side" in ax.get_xlabel()
