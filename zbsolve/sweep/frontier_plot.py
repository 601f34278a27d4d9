"""The frontier drawn: time against peak memory, one step line and marker per placement, each
point's certified bound as a whisker (and a band along the line), the hand-made schedules as
hollow markers; points at one spot are spread apart."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from zbsolve.formats.atomic_files import write_atomic
from zbsolve.plots.schedule_plot import check_plot_path

from .frontier import Frontier

MARKERS = "os^vD<>Ph*Xd+xpH1"
SOLVED_MARKERS = "oDs^vP*X"  # one filled marker per placement: coincident placements stay readable


def dodged(points: list[tuple[float, float]], x_span: float, y_span: float) -> list[float]:
    """x positions for points that would otherwise hide each other: points within about a
    marker of each other (1.5% of either axis) spread sideways, 2.5% of the axis apart, in
    the order given."""
    def spot(x: float, y: float) -> tuple[int, int]:
        return round(x / (0.015 * x_span)), round(y / (0.015 * y_span))

    groups: dict[tuple[int, int], list[int]] = {}
    for k, (x, y) in enumerate(points):
        groups.setdefault(spot(x, y), []).append(k)
    xs = [x for x, _ in points]
    for members in groups.values():
        centre = sum(points[k][0] for k in members) / len(members)
        for place, k in enumerate(members):
            xs[k] = centre + (place - (len(members) - 1) / 2) * 0.025 * x_span
    return xs


def plot_frontier(f: Frontier, path: str | os.PathLike) -> None:
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(9, 5.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    solved = [p for p in f.points if p.on_placement_frontier]
    shown = [p.value for p in solved]
    lowest = min([p.bound if p.bound is not None else p.value for p in solved], default=0.0)
    top = 1.3 * max(shown, default=1.0)
    peaks = [p.peak for p in solved] + [b["peak"] for b in f.baselines]
    span = (max(peaks) - min(peaks)) if len(set(peaks)) > 1 else max(1.0, max(peaks, default=1.0) * 0.5)
    # Solved points and hand-made ones at one spot are spread apart, solved first.
    spots = [(p.peak, p.value) for p in solved] + [(b["peak"], b["value"]) for b in f.baselines]
    xs = dict(enumerate(dodged(spots, span, max(top - 0.95 * lowest, 1e-9))))
    where = {id(p): xs[k] for k, p in enumerate(solved)}
    solved_handles: list = []  # a marker, and the line where there is one, per placement
    for k, placement in enumerate(f.placements()):
        own = sorted((p for p in solved if f.series_of(p) == placement), key=lambda p: p.peak)
        if not own:
            continue
        colour, marker = colours[k % len(colours)], SOLVED_MARKERS[k % len(SOLVED_MARKERS)]
        xs_own, ys = [where[id(p)] for p in own], [p.value for p in own]
        bounds = [p.bound if p.bound is not None else p.value for p in own]
        if len(own) > 1:
            ax.step(xs_own, ys, where="post", color=colour, linewidth=1.5)
            ax.fill_between(xs_own, bounds, ys, step="post", color=colour, alpha=0.12, linewidth=0)
        # Each point's proven bound: a whisker down from its value.
        below = [v - b for v, b in zip(ys, bounds)]
        ax.errorbar(xs_own, ys, yerr=[below, [0.0] * len(ys)], fmt=marker,
                    color=colour, markersize=6, capsize=3, linewidth=1)
        solved_handles.append(Line2D([], [], color=colour, marker=marker, markersize=6,
                                     linewidth=1.5 if len(own) > 1 else 0, label=f"{placement} (solved)"))
    for k, name in enumerate(dict.fromkeys(b["name"] for b in f.baselines)):
        indices = [j for j, b in enumerate(f.baselines) if b["name"] == name]
        marker = MARKERS[k % len(MARKERS)]
        look: dict[str, Any] = {"color": "0.35"} if marker in "+x1" else {"facecolors": "none", "edgecolors": "0.35"}
        ax.scatter([xs[len(solved) + j] for j in indices], [f.baselines[j]["value"] for j in indices],
                   marker=marker, s=30, linewidths=0.8, label=name, **look)
    cut = any(b["value"] > top for b in f.baselines)
    ax.set_ylim(0.95 * lowest, top)  # a far slower baseline would squash the frontiers flat
    memory = f"peak activation memory per device{f' ({f.memory_unit})' if f.memory_unit else ''}"
    time_axis = "time per microbatch" if f.per_microbatch else "step time"
    moved = any(abs(x - spot[0]) > 1e-12 for x, spot in zip(xs.values(), spots))
    ax.set_xlabel(memory + ("; points at about one spot are drawn side by side" if moved else ""))
    ax.set_ylabel(f"{time_axis} ({f.time_unit})")
    title = "Memory-time frontier (whiskers and shading: down to each point's proven bound)"
    if cut:
        title += f"\nhand-made schedules above {top:.4g} are off the chart"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()  # the hand-made schedules' markers
    ax.legend(handles=solved_handles + handles, fontsize=7, frameon=False, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".").lower(), dpi=150)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
