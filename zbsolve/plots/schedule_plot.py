"""Gantt chart and memory over time of one schedule, optionally beside a reference (1F1B).

Reads a Schedule only. Idle time is the white between bars; an overlapped F&B pair is
drawn as its two halves stacked in one row slot, hatched; a device's copies (the offload
lever) as two thin rows under its compute, device-to-host above host-to-device.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from zbsolve.errors import UsageError
from zbsolve.formats.atomic_files import check_writable, write_atomic
from zbsolve.problem.op_graph import OpGraph
from zbsolve.problem.op_kinds import KINDS
from zbsolve.problem.placements import chunks_on_devices
from zbsolve.schedule.schedule import Schedule

# FC a lighter F (a forward that keeps only its checkpoint), R a purple of its own (recomputation);
# FO a greyer F (its activation goes to host), its copies O red and L yellow
COLOURS = {"F": "#4c78a8", "B": "#54a24b", "W": "#f58518", "BW": "#72b7b2", "FC": "#9ecae9", "R": "#b279a2",
           "FO": "#7d8fa3", "O": "#e45756", "L": "#eeca3b"}
COPY_ROWS = {"O": (-0.4, 0.1), "L": (-0.28, 0.1)}  # (bottom, height) below a device's row centre
OTHER = "#9d755d"  # a kind without a colour of its own here


def _order(kind: str) -> int:
    """Legend order: the table's."""
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


FORMATS = ("png", "svg", "pdf")


def memory_steps(schedule: Schedule, device: int) -> tuple[list[float], list[float]]:
    """Times and memory levels of a device (level after each change), from its op list."""
    graph = OpGraph(schedule.problem)
    events = []
    for timed in schedule.devices[device]:
        allocated, released = graph.memory_effect(timed.op)
        if allocated:
            events.append((timed.start, 1, graph.memory(allocated)))
        if released:
            events.append((timed.end, 0, -graph.memory(released)))
    times, levels, level = [0.0], [0.0], 0.0
    for time, _, change in sorted(events):  # releases before allocations at the same time
        level += change
        if times[-1] == time:  # one level per instant: no zero-width dips between ops
            levels[-1] = level
        else:
            times.append(time)
            levels.append(level)
    times.append(schedule.metrics.makespan)
    levels.append(level)
    return times, levels


def chunk_of(schedule: Schedule) -> dict[tuple[int, int], int]:
    """Each (pipe, stage)'s chunk on its device: the direction for bidirectional (pipe 0 down,
    1 up), else the stage's place among the device's stages (vshape: 0 down, 1 back)."""
    problem = schedule.problem
    if len(problem.pipes) > 1:
        return {(p, k): p for p, pipe in enumerate(problem.pipes) for k in range(len(pipe.stages))}
    return chunks_on_devices(problem)


def shade(kind: str, chunk: int) -> str:
    """The kind's colour, darker for the first chunk and far lighter for each later one, so
    that chunks and directions stand apart even in thin bars."""
    import matplotlib.colors as mcolors

    r, g, b = mcolors.to_rgb(COLOURS.get(kind, OTHER))
    if chunk == 0:
        return mcolors.to_hex((0.8 * r, 0.8 * g, 0.8 * b))
    mix = min(0.8, 0.35 + 0.2 * chunk)
    return mcolors.to_hex((r + (1 - r) * mix, g + (1 - g) * mix, b + (1 - b) * mix))


def _gantt(ax, schedule: Schedule, makespan: float, points_per_time: float) -> None:
    """The rows of ops; a bar's microbatch is written in it where it fits (`points_per_time`:
    the panel's width in points over the time it shows)."""
    # One collection per row, kind, chunk and pair half: a bar per op is far too slow at large sizes.
    P = schedule.problem.devices
    chunks = chunk_of(schedule)
    copies = any(t.op.kind in COPY_ROWS for ops in schedule.devices for t in ops)
    bars: dict[tuple[float, float, str, int, bool], list[tuple[float, float]]] = {}
    for d, ops in enumerate(schedule.devices):
        y = P - 1 - d
        for timed in ops:
            width = timed.end - timed.start
            bottom, height = (y - 0.15, 0.55) if copies else (y - 0.4, 0.8)
            if timed.op.kind in COPY_ROWS:
                below, height = COPY_ROWS[timed.op.kind]
                bottom = y + below
            elif timed.overlap is not None:  # pair halves: F on top, backward below
                height = 0.4
                bottom = y if timed.op.kind == "F" else y - 0.4
            chunk = chunks[(timed.op.pipe, timed.op.stage)]
            bars.setdefault((bottom, height, timed.op.kind, chunk, timed.overlap is not None), []).append(
                (timed.start, width))
            label = str(timed.op.microbatch)
            # 6-point digits are about 3.6 points wide; copies' rows are too thin for any
            if timed.op.kind not in COPY_ROWS and width * points_per_time >= 4.2 * len(label) + 2:
                ax.text(timed.start + width / 2, bottom + height / 2, str(timed.op.microbatch),
                        ha="center", va="center", fontsize=6, color="white")
    for (bottom, height, kind, chunk, paired), spans in bars.items():
        ax.broken_barh(spans, (bottom, height), facecolors=shade(kind, chunk), edgecolor="white", linewidth=0.4,
                       hatch="///" if paired else None)
    ax.set_yticks(range(P), [f"device {P - 1 - y}" for y in range(P)], fontsize=7)
    ax.set_ylim(-0.6, P - 0.4)
    m, problem, info = schedule.metrics, schedule.problem, schedule.solver
    proof = ""
    if info is not None and info.bound is not None and info.gap is not None:
        proof = f" (bound {info.bound:.6g}, gap {100 * info.gap:.2f}%)"
    ax.set_title(f"{schedule.name}: {problem.objective} {schedule.value:.6g} {problem.time_unit}{proof}, "
                 f"bubble {100 * m.bubble_rate:.2f}%, peak {m.peak_memory_x:.3g}x U", fontsize=8)


LINE_STYLES = ("-", "--", ":", "-.")
LEGEND_COLUMNS = 5
LEGEND_DEVICES = 8  # more devices get a colour scale instead of a legend


def memory_top(schedule: Schedule) -> float:
    """The highest level or limit a memory panel shows."""
    levels = [max(memory_steps(schedule, d)[1]) for d in range(schedule.problem.devices)]
    return max(levels + list(schedule.problem.memory_limit or []), default=0.0)


def _memory(ax, schedule: Schedule, top: float | None = None) -> None:
    """Memory per device over time; `top`, the panels' one scale (each its own where None)."""
    shared, top, P = top, 0.0, schedule.problem.devices
    import matplotlib.pyplot as plt

    ramp = plt.get_cmap("viridis") if P > LEGEND_DEVICES else None
    for d in range(P):
        times, levels = memory_steps(schedule, d)
        top = max(top, *levels)
        # Mirror-image devices (DualPipe, V-shape) often share a curve: dashes keep both visible.
        colour = None if ramp is None else ramp(d / max(1, P - 1))
        (line,) = ax.step(times, levels, where="post", linewidth=0.8, linestyle=LINE_STYLES[d % len(LINE_STYLES)],
                          label=f"device {d}", color=colour)
        limits = schedule.problem.memory_limit
        if limits is not None and len(set(limits)) > 1:  # each device against its own limit
            ax.axhline(limits[d], color=line.get_color(), linestyle=(0, (1, 2)), linewidth=0.9,
                       label="own limits (dotted)" if d == 0 else None)
    if ramp is not None:  # many devices: a colour scale reads where sixteen legend rows do not
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        bar = plt.colorbar(ScalarMappable(Normalize(0, P - 1), ramp), ax=ax, pad=0.01, aspect=15)
        bar.set_label("device", fontsize=7)
        bar.ax.tick_params(labelsize=6)
    limit = schedule.problem.memory_limit
    if limit is not None:
        top = max(top, max(limit))
        if len(set(limit)) == 1:
            ax.axhline(limit[0], color="red", linestyle="--", linewidth=0.8, label="limit")
    name = schedule.problem.memory_unit_name
    unit = f" ({name})" if name else f"\n(U = {schedule.problem.one_f_one_b_peak():g})"
    ax.set_ylabel(f"activation memory{unit}", fontsize=7)
    ax.set_xlabel(f"time ({schedule.problem.time_unit})", fontsize=7)
    ax.tick_params(labelsize=7)
    top = max(top, shared or 0.0)
    if P <= LEGEND_DEVICES:
        # Room above the highest level for the legend's rows, which hid the curves' plateau.
        legend = ax.legend(fontsize=6, ncol=LEGEND_COLUMNS, loc="upper right")
        rows = -(-len(legend.get_texts()) // LEGEND_COLUMNS)
        ax.set_ylim(0, (top or 1) * (1.1 + 0.17 * rows))
    else:
        ax.set_ylim(0, (top or 1) * 1.05)


def _kind_handles(schedule: Schedule) -> list:
    """One legend patch per kind and chunk drawn (per direction with two pipes)."""
    from matplotlib.patches import Patch

    chunks = chunk_of(schedule)
    names: tuple[str, ...]
    if len(schedule.problem.pipes) > 1:
        names = ("down", "up")
    else:
        names = tuple(f"chunk {c}" for c in range(max(chunks.values()) + 1))
    used = sorted({(t.op.kind, chunks[(t.op.pipe, t.op.stage)]) for ops in schedule.devices for t in ops},
                  key=lambda item: (_order(item[0]), item[1]))
    return [Patch(color=shade(k, c), label=f"{k} {names[c]}" if len(names) > 1 else k) for k, c in used]


def check_plot_path(path: str | os.PathLike) -> None:
    suffix = Path(path).suffix.lstrip(".").lower()
    if suffix not in FORMATS:
        raise UsageError(f"plot output must end in .{', .'.join(FORMATS)}; got {str(path)!r}")
    check_writable(path)


def plot(schedule: Schedule, path: str | os.PathLike, reference: Schedule | None = None) -> None:
    """Write a Gantt chart plus memory curves (PNG, SVG or PDF, from the file name).

    With `reference`, the two schedules stand side by side on one time axis.
    """
    check_plot_path(path)
    suffix = Path(path).suffix.lstrip(".").lower()
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    shown = [schedule] + ([reference] if reference is not None else [])
    makespan = max(s.metrics.makespan for s in shown)
    P = schedule.problem.devices
    # A panel wide enough for the busiest device's ops (about 0.05 inch each); beyond 12 inches
    # the reference goes below the schedule, on the same time axis, not beside it.
    ops = max(len(ops) for s in shown for ops in s.devices)
    width = min(20.0, max(7.0, 0.05 * ops))
    stacked = len(shown) > 1 and width > 12
    gantt_height, memory_height = max(2, 0.35 * P), 2 + (1 if P > LEGEND_DEVICES else 0)
    if stacked:
        fig, grid = plt.subplots(2 * len(shown), 1, sharex=True, squeeze=False,
                                 figsize=(width, 1.2 + len(shown) * (gantt_height + memory_height)),
                                 gridspec_kw={"height_ratios": [gantt_height, memory_height] * len(shown)})
        axes = [[grid[2 * k][0] for k in range(len(shown))], [grid[2 * k + 1][0] for k in range(len(shown))]]
    else:
        fig, grid = plt.subplots(2, len(shown), sharex=True, squeeze=False,
                                 figsize=(width * len(shown), 1.2 + gantt_height + memory_height),
                                 gridspec_kw={"height_ratios": [gantt_height, memory_height]})
        axes = [list(row) for row in grid]
    points_per_time = (width - 1.5) * 72 / (makespan * 1.01)  # less the row names and the margins
    top = max(memory_top(s) for s in shown)  # one memory scale: the panels compare at a glance
    for column, s in enumerate(shown):
        _gantt(axes[0][column], s, makespan, points_per_time)
        _memory(axes[1][column], s, top)
    axes[0][0].set_xlim(0, makespan * 1.01)
    handles = _kind_handles(schedule)
    if reference is not None:
        named = {h.get_label().split()[0] for h in handles}
        kinds = {t.op.kind for ops in reference.devices for t in ops} - named
        handles += [Patch(color=shade(k, 0), label=k) for k in sorted(kinds, key=_order)]
    if any(t.overlap is not None for s in shown for ops in s.devices for t in ops):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="F&B pair"))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=suffix, dpi=150)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
