"""The frontier drawn: time against peak memory, one step line per placement, the band up to
each point's certified bound, and the hand-made schedules as markers."""

from __future__ import annotations

import io
import os
from pathlib import Path

from zbsolve.formats.atomic_files import write_atomic
from zbsolve.plots.schedule_plot import check_plot_path

from .frontier import Frontier

MARKERS = "os^vD<>Ph*Xd+xpH1"


def plot_frontier(f: Frontier, path: str | os.PathLike) -> None:
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, placement in enumerate(f.placements()):
        own = sorted((p for p in f.points if p.placement == placement and p.on_placement_frontier),
                     key=lambda p: p.peak)
        if not own:
            continue
        colour = colours[k % len(colours)]
        xs, ys = [p.peak for p in own], [p.value for p in own]
        ax.step(xs, ys, where="post", color=colour, label=f"{placement} (solved)", linewidth=1.8)
        ax.plot(xs, ys, "o", color=colour, markersize=4)
        bounds = [p.bound if p.bound is not None else p.value for p in own]
        ax.fill_between(xs, bounds, ys, step="post", color=colour, alpha=0.15, linewidth=0)
    for k, name in enumerate(dict.fromkeys(b["name"] for b in f.baselines)):
        own = [b for b in f.baselines if b["name"] == name]
        marker = MARKERS[k % len(MARKERS)]
        colours = {"color": "0.35"} if marker in "+x1" else {"facecolors": "none", "edgecolors": "0.35"}
        ax.scatter([b["peak"] for b in own], [b["value"] for b in own], marker=marker, s=28, linewidths=0.8,
                   label=name, **colours)
    shown = [p.value for p in f.points if p.on_placement_frontier]
    lowest = min([p.bound if p.bound is not None else p.value for p in f.points if p.on_placement_frontier],
                 default=0.0)
    top = 1.3 * max(shown, default=1.0)
    cut = any(b["value"] > top for b in f.baselines)
    ax.set_ylim(0.95 * lowest, top)  # a far slower baseline would squash the frontiers flat
    memory = f"peak activation memory per device{f' ({f.memory_unit})' if f.memory_unit else ''}"
    time_axis = "time per microbatch" if f.per_microbatch else "step time"
    ax.set_xlabel(memory)
    ax.set_ylabel(f"{time_axis} ({f.time_unit})")
    title = "Memory-time frontier (shaded: down to the proven bound)"
    if cut:
        title += f"; baselines above {top:.4g} are off the chart"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, frameon=False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".").lower(), dpi=150)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
