"""The comparison table a person reads at a glance (docs/design.md, "Command line")."""

from __future__ import annotations

from zbsolve.schedule.schedule import Schedule


def _num(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:.0f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def comparison_table(rows: list[Schedule], reference: Schedule) -> str:
    """One line per schedule; speed-ups are relative to `reference` (1F1B)."""
    unit = reference.problem.time_unit
    header = ["schedule", f"makespan ({unit})", "bubble", "span bubble", "peak mem (xU)",
              "vs 1F1B", "span vs 1F1B", "status", "bound", "gap", "time (s)", "note"]
    lines = [header]
    for s in rows:
        m = s.metrics
        over = s.over_memory_limit()
        note = ""
        if over:
            note = f"over memory limit on device {over[0]}" + (f" (+{len(over) - 1} more)" if len(over) > 1 else "")
        if s.solver.message and not note:
            note = s.solver.message
        lines.append([
            s.name,
            _num(m.makespan, 6),
            _pct(m.bubble_rate),
            _pct(m.span_bubble_rate),
            f"{m.peak_memory_x:.3f}",
            f"{reference.metrics.makespan / m.makespan:.4f}x",
            f"{reference.metrics.span / m.span:.4f}x" if m.span else "-",
            s.solver.status,
            _num(s.solver.bound, 6),
            _pct(s.solver.gap),
            "-" if s.solver.wall_time_s is None else f"{s.solver.wall_time_s:.1f}",
            note,
        ])
    widths = [max(len(row[c]) for row in lines) for c in range(len(header))]
    text = []
    for j, row in enumerate(lines):
        cells = [row[0].ljust(widths[0])] + [row[c].rjust(widths[c]) for c in range(1, len(row) - 1)]
        text.append("  ".join(cells + [row[-1]]).rstrip())
        if j == 0:
            text.append("  ".join("-" * w for w in widths[:-1]) + "  " + "-" * max(4, widths[-1]))
    return "\n".join(text)
