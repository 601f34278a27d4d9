"""The comparison table a person reads at a glance (docs/design.md, "Command line")."""

from __future__ import annotations

from zbsolve.schedule.schedule import Schedule


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _column(values: list[float | None], significant: int = 6) -> list[str]:
    """A column's numbers with one number of decimals, as many as its most precise value needs
    at `significant` digits: 1310.40 beside 1432.71, not 1310.4."""

    def decimals(v: float) -> int:
        text = f"{v:.{significant}g}"
        return 0 if "e" in text or "." not in text else len(text.split(".")[1])

    shown = [v for v in values if v is not None]
    places = min(6, max((decimals(v) for v in shown), default=0))
    return ["-" if v is None else f"{v:.{places}f}" for v in values]


def _note(s: Schedule) -> str:
    over = s.over_memory_limit()
    recomputed, offloaded = s.recomputed(), s.offloaded()
    passes = sum(len(pipe.stages) * len(pipe.microbatches) for pipe in s.problem.pipes)  # microbatch-stages
    used = "; ".join(f"{verb} {n} of {passes}" for verb, n in (("recomputes", recomputed), ("offloads", offloaded))
                     if n)
    if over:
        said = f"over memory limit on device {over[0]}" + (f" (+{len(over) - 1} more)" if len(over) > 1 else "")
    else:
        said = s.solver.message or ""
    return "; ".join(part for part in (used, said) if part)


def table_records(rows: list[Schedule], reference: Schedule | None) -> list[dict]:
    """The table's rows as data (for CSV and JSON), numbers unrounded, memory per device."""
    problem = rows[0].problem
    return [{
        "schedule": s.name, "objective": problem.objective, "value": s.value, "bound": s.solver.bound,
        "gap": s.solver.gap, "makespan": s.metrics.makespan, "span": s.metrics.span,
        "bubble": s.metrics.bubble_rate, "span_bubble": s.metrics.span_bubble_rate,
        "peak_memory_x": s.metrics.peak_memory_x, "peak_memory": list(s.metrics.peak_memory),
        "memory_unit": problem.memory_unit_name,
        "speedup_vs_1f1b": reference.metrics.makespan / s.metrics.makespan if reference else None,
        "span_speedup_vs_1f1b": reference.metrics.span / s.metrics.span if reference and s.metrics.span else None,
        "status": s.solver.status, "time_s": s.solver.wall_time_s, "fits": not s.over_memory_limit(),
        "time_unit": problem.time_unit, "recomputed": s.recomputed(),
        "offloaded": s.offloaded(), "note": _note(s),
    } for s in rows]


def comparison_table(rows: list[Schedule], reference: Schedule | None) -> str:
    """One line per schedule, led by the problem's objective with its bound and gap; speed-ups
    are relative to `reference` (1F1B; none for hand-built pipes, which have no single chain)."""
    problem = rows[0].problem
    unit, objective = problem.time_unit, problem.objective
    other = "span" if objective == "makespan" else "makespan"
    memory = f"peak mem ({problem.memory_unit_name})" if problem.memory_unit_name else "peak mem"
    header = ["schedule", f"{objective} ({unit})", "bound", "gap", f"{other} ({unit})", "bubble", "span bubble",
              memory, "peak mem (xU)", "vs 1F1B", "span vs 1F1B", "status", "time (s)", "note"]
    peaks = _column([max(s.metrics.peak_memory) for s in rows], significant=4)
    values = _column([s.value for s in rows])
    bounds = _column([s.solver.bound for s in rows])
    others = _column([s.metrics.span if objective == "makespan" else s.metrics.makespan for s in rows])
    lines = [header]
    for k, s in enumerate(rows):
        m, note = s.metrics, _note(s)
        lines.append([
            s.name,
            values[k],
            bounds[k],
            _pct(s.solver.gap),
            others[k],
            _pct(m.bubble_rate),
            _pct(m.span_bubble_rate),
            peaks[k],
            f"{m.peak_memory_x:.3f}",
            f"{reference.metrics.makespan / m.makespan:.4f}x" if reference else "-",
            f"{reference.metrics.span / m.span:.4f}x" if reference and m.span else "-",
            s.solver.status,
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
