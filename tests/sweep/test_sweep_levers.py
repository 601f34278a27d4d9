"""`--levers` as a sweep's grid dimension: points with and without recomputation side by
side, keys that stores already hold, series by levers, and what is refused up front."""

import pytest

from zbsolve.cli import main
from zbsolve.errors import UsageError
from zbsolve.problem.problem import StageCost
from zbsolve.sweep.grid import Point, cost_model, parse_levers_grid, points, problem_of
from zbsolve.sweep.store import Store

COSTS = cost_model(None, [StageCost(1, 1, 1, activation=1, residual=0.5, checkpoint=0.1)], 3, 0.0, True, None, "ms")


def test_a_point_without_levers_keeps_its_key_and_one_with_them_names_them():
    assert Point(3, "single", 6, "0.5x", "makespan").key == "P=3 single M=6 memory=0.5x makespan"
    with_levers = Point(3, "single", 6, "0.5x", "makespan", levers="recompute")
    assert with_levers.key == "P=3 single M=6 memory=0.5x makespan levers=recompute"
    assert problem_of(with_levers, COSTS).levers == ("recompute",)
    assert problem_of(with_levers, COSTS).stage_costs[0].checkpoint == 0.1


@pytest.mark.parametrize("text, message", [("swap", "each entry must be none, one of recompute, offload"),
                                           ("recompute+swap", "levers joined by +"), ("", "--levers")])
def test_a_malformed_lever_list_is_refused(text, message):
    with pytest.raises(UsageError, match=message):
        parse_levers_grid(text)


def test_levers_joined_by_plus_are_one_grid_entry_in_the_table_s_order():
    assert parse_levers_grid("none, offload+recompute,recompute") == [None, "recompute+offload", "recompute"]
    costs = cost_model(None, [StageCost(1, 1, 1, activation=1, residual=0.5, offload=0.25)], 3, 0.0, True, None, "ms")
    both = Point(3, "single", 6, "0.5x", "makespan", levers="recompute+offload")
    assert both.key == "P=3 single M=6 memory=0.5x makespan levers=recompute+offload"
    assert problem_of(both, costs).levers == ("recompute", "offload")


def test_levers_with_the_span_are_refused_before_anything_runs():
    with pytest.raises(UsageError, match="--levers are solved for the makespan"):
        points([3], ["single"], [6], ["0.5x"], ["span"], COSTS, levers=[None, "recompute"])


def test_a_sweep_with_and_without_recomputation_stores_both_and_draws_them_apart(tmp_path, capsys):
    store = tmp_path / "s.db"
    assert main(["sweep", "--stages", "3", "--microbatches", "6", "--placements", "single", "--memory", "0.34x",
                 "--checkpoint", "0.1", "--levers", "none,recompute", "--time-limit", "2", "--workers", "1",
                 "--jobs", "1", "-q", "--store", str(store), "--report"]) == 0
    shown = capsys.readouterr().out
    assert "single levers=none" in shown and "single levers=recompute" in shown
    reader = Store(store)
    rows = {(r["levers"], r["name"]): r for r in reader.results()}
    reader.close()
    without, recomputed = rows[(None, "solved")], rows[("recompute", "solved")]
    # one microbatch in flight per device without levers; recomputation lets more in
    assert without["status"] == "optimal" and recomputed["value"] < without["value"]
    assert ("recompute", "1f1b-r") in rows and (None, "1f1b-r") not in rows
