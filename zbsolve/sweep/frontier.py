"""The memory-time frontier of a sweep: the solved points no other point beats on both step
time and peak memory, per placement and over all, each with its certified bound."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FrontierPoint:
    placement: str
    devices: int
    microbatches: int
    memory: str  # the limit as asked for
    objective: str
    peak: float  # the largest device's peak, in the profile's memory unit
    value: float  # the objective's value (per microbatch when the sweep varies M)
    bound: float | None  # certified lower bound on `value`, same scale
    gap: float | None
    status: str
    schedule_path: str | None
    on_placement_frontier: bool = False  # on its series' frontier: its placement's, and partition's where they vary
    on_frontier: bool = False
    partition: str | None = None  # the layer split asked for (a profile that lists layers)
    levers: str | None = None  # the memory levers its schedules could use


@dataclass(frozen=True)
class Frontier:
    points: list[FrontierPoint]  # every solved point, flags set
    baselines: list[dict]  # each baseline's own non-dominated points that keep their limit
    per_microbatch: bool  # values divided by M: the sweep varies the microbatch count
    time_unit: str
    memory_unit: str | None
    by_partition: bool = False  # the sweep varied the partition: each placement and partition is a series
    by_levers: bool = False  # the sweep varied the levers: they name the series too

    def placements(self) -> list[str]:
        """The series: each placement, with its partition and levers where a sweep varied them."""
        return list(dict.fromkeys(self.series_of(p) for p in self.points))

    def series_of(self, point: FrontierPoint) -> str:
        return series(point, self.by_partition, self.by_levers)


def series(point: FrontierPoint, by_partition: bool, by_levers: bool = False) -> str:
    name = f"{point.placement} partition={point.partition}" if by_partition else point.placement
    return f"{name} levers={point.levers or 'none'}" if by_levers else name


def pareto(items: list, peak, value) -> set[int]:
    """Indices of the items no other item beats: no more memory and strictly less time."""
    order = sorted(range(len(items)), key=lambda i: (peak(items[i]), value(items[i])))
    kept, best = set(), float("inf")
    for i in order:
        if value(items[i]) < best - 1e-9:
            kept.add(i)
            best = value(items[i])
    return kept


def frontier(results: list[dict], settings: dict) -> Frontier:
    per_mb = len({r["microbatches"] for r in results}) > 1
    scale = (lambda r: 1.0 / r["microbatches"]) if per_mb else (lambda r: 1.0)
    solved = [r for r in results if r["name"] == "solved"]
    points = [FrontierPoint(r["placement"], r["devices"], r["microbatches"], r["memory"], r["objective"],
                            max(r["peak_memory"]), r["value"] * scale(r),
                            None if r["bound"] is None else r["bound"] * scale(r), r["gap"], r["status"],
                            r["schedule_path"], partition=r.get("partition"), levers=r.get("levers"))
              for r in solved]
    overall = pareto(points, lambda p: p.peak, lambda p: p.value)
    flags = [dict(on_frontier=i in overall) for i in range(len(points))]
    by_partition = len({p.partition for p in points}) > 1
    by_levers = len({p.levers for p in points}) > 1
    for name in dict.fromkeys(series(p, by_partition, by_levers) for p in points):
        index = [i for i, p in enumerate(points) if series(p, by_partition, by_levers) == name]
        for k in pareto([points[i] for i in index], lambda p: p.peak, lambda p: p.value):
            flags[index[k]]["on_placement_frontier"] = True
    points = [FrontierPoint(**{**asdict(p), **f}) for p, f in zip(points, flags)]
    baselines = []
    for name in dict.fromkeys(r["name"] for r in results if r["name"] != "solved"):
        own = [r for r in results if r["name"] == name and r["fits"]]
        for k in sorted(pareto(own, lambda r: max(r["peak_memory"]), lambda r: r["value"] * scale(r))):
            r = own[k]
            baselines.append({"name": name, "placement": r["placement"], "partition": r.get("partition"),
                              "levers": r.get("levers"),
                              "devices": r["devices"],
                              "microbatches": r["microbatches"], "peak": max(r["peak_memory"]),
                              "value": r["value"] * scale(r)})
    costs = settings["costs"]
    return Frontier(sorted(points, key=lambda p: (series(p, by_partition, by_levers), p.peak, p.value)), baselines,
                    per_mb, costs["time_unit"], costs.get("memory_unit"), by_partition, by_levers)


def _unit(unit: str | None) -> str:
    return f" ({unit})" if unit else ""


def frontier_table(f: Frontier) -> str:
    """The frontier over all placements, then each placement's own, as text."""
    objectives = sorted({p.objective for p in f.points})
    name = objectives[0] if len(objectives) == 1 else "objective"
    what = f"{name} per microbatch{_unit(f.time_unit)}" if f.per_microbatch else f"{name}{_unit(f.time_unit)}"
    lines = []

    def block(title: str, chosen: list[FrontierPoint]) -> None:
        lines.append(title)
        header = ["placement", "P", "M", "limit", f"peak mem{_unit(f.memory_unit)}", what, "bound", "gap", "status"]
        rows = [[f.series_of(p), str(p.devices), str(p.microbatches), p.memory, f"{p.peak:.4g}", f"{p.value:.6g}",
                 "-" if p.bound is None else f"{p.bound:.6g}", "-" if p.gap is None else f"{100 * p.gap:.2f}%",
                 p.status] for p in chosen]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
        lines.append("")

    block("Frontier over all placements (no point is faster with no more memory):",
          sorted((p for p in f.points if p.on_frontier), key=lambda p: p.peak))
    for placement in f.placements():
        block(f"Frontier of {placement}:",
              sorted((p for p in f.points if f.series_of(p) == placement and p.on_placement_frontier),
                     key=lambda p: p.peak))
    lines.append("The bound is what any schedule of that point could reach at best: where it is below the "
                 "value, the frontier could still move by up to the gap.")
    return "\n".join(lines)


def frontier_csv(f: Frontier) -> str:
    out = io.StringIO()
    fields = list(FrontierPoint.__dataclass_fields__)
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for p in f.points:
        writer.writerow(asdict(p))
    return out.getvalue()


def frontier_json(f: Frontier) -> str:
    return json.dumps({"per_microbatch": f.per_microbatch, "time_unit": f.time_unit,
                       "memory_unit": f.memory_unit, "points": [asdict(p) for p in f.points],
                       "baselines": f.baselines}, indent=1) + "\n"
