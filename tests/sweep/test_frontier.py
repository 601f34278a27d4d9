"""The frontier on hand-made results: who is dominated, per placement and over all, values per
microbatch when M varies, and the exports."""

import csv
import io
import json

from zbsolve.sweep.frontier import frontier, frontier_csv, frontier_json, frontier_table, pareto

SETTINGS = {"costs": {"time_unit": "ms", "memory_unit": "GB"}}


def row(placement, M, memory, peak, value, bound, name="solved", fits=True):
    return {"name": name, "placement": placement, "devices": 4, "microbatches": M, "memory": memory,
            "objective": "makespan", "peak_memory": [peak / 2, peak], "value": value, "bound": bound,
            "gap": None if bound is None else (value - bound) / value, "status": "feasible",
            "schedule_path": None, "fits": fits}


RESULTS = [
    row("single", 8, "0.5x", 4.0, 30.0, 28.0),
    row("single", 8, "1x", 8.0, 24.0, 24.0),
    row("single", 8, "2x", 12.0, 24.0, 24.0),  # no faster than with 8: dominated
    row("vshape", 8, "0.5x", 4.0, 27.0, 25.0),
    row("vshape", 8, "1x", 8.0, 25.0, 22.0),  # on its own frontier; single is faster at the same memory
    row("vshape", 8, "2x", 9.0, 23.0, 23.0),
    row("single", 8, "1x", 8.0, 27.0, None, name="1f1b"),
    row("single", 8, "2x", 12.0, 27.0, None, name="1f1b"),  # 1f1b's own dominated point
    row("vshape", 8, "0.5x", 5.0, 20.0, None, name="zb-v", fits=False),  # over its limit: not shown
]


def test_pareto_keeps_the_points_nothing_beats():
    items = [(1, 5), (2, 5), (2, 3), (3, 4), (4, 1), (4, 1)]
    assert sorted(pareto(items, lambda p: p[0], lambda p: p[1])) == [0, 2, 4]


def test_frontier_flags_per_placement_and_over_all():
    f = frontier(RESULTS, SETTINGS)
    on = {(p.placement, p.memory): (p.on_placement_frontier, p.on_frontier) for p in f.points}
    assert on == {("single", "0.5x"): (True, False), ("single", "1x"): (True, True),
                  ("single", "2x"): (False, False), ("vshape", "0.5x"): (True, True),
                  ("vshape", "1x"): (True, False), ("vshape", "2x"): (True, True)}
    assert not f.per_microbatch
    assert f.baselines == [{"name": "1f1b", "placement": "single", "partition": None, "levers": None, "devices": 4,
                            "microbatches": 8, "peak": 8.0, "value": 27.0}]


def test_values_are_per_microbatch_when_the_sweep_varies_m():
    f = frontier(RESULTS + [row("single", 16, "1x", 8.0, 40.0, 36.0)], SETTINGS)
    assert f.per_microbatch
    best = next(p for p in f.points if p.microbatches == 16)
    assert (best.value, best.bound, best.on_frontier) == (2.5, 2.25, True)


def test_the_table_and_exports_say_the_same():
    f = frontier(RESULTS, SETTINGS)
    table = frontier_table(f)
    assert "peak mem (GB)" in table and "makespan (ms)" in table
    first = table.splitlines()[3].split()
    assert first[:7] == ["vshape", "4", "8", "0.5x", "4", "27", "25"]
    rows = list(csv.DictReader(io.StringIO(frontier_csv(f))))
    assert [(r["placement"], r["memory"], r["on_frontier"]) for r in rows if r["on_frontier"] == "True"] == [
        ("single", "1x", "True"), ("vshape", "0.5x", "True"), ("vshape", "2x", "True")]
    data = json.loads(frontier_json(f))
    assert len(data["points"]) == 6 and data["memory_unit"] == "GB"
