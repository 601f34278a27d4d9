"""The grid: lists and ranges as typed, costs that follow the rank count, refusals up front."""

import json
import sqlite3

import pytest
from helpers import REPO_ROOT

from zbsolve.errors import UsageError
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import load_profile
from zbsolve.sweep.grid import cost_model, from_dict, parse_counts, parse_memory_grid, points, problem_of, to_dict

PROFILE = load_profile(REPO_ROOT / "models" / "zb-1.5b.json")


def model(profile=PROFILE, devices=8):
    costs = profile.rank_costs(devices) if profile else [StageCost(1, 1, 1, 1, 0.5)] * devices
    return cost_model(profile, costs, devices, 0.0, True, None, "ms")


def test_a_memory_range_includes_both_ends():
    assert parse_memory_grid("0.5x:2x:8") == ["0.5x", "0.7143x", "0.9286x", "1.143x", "1.357x", "1.571x",
                                               "1.786x", "2x"]
    assert parse_memory_grid("1x, 2x,1x") == ["1x", "2x"]


@pytest.mark.parametrize("text", ["2x:1x:3", "0.5x:2x:1", "0.5x:2x", "1:2:3", "", "1x,,2x"])
def test_a_malformed_memory_grid_is_refused(text):
    with pytest.raises(UsageError):
        parse_memory_grid(text)


@pytest.mark.parametrize("text", ["0", "8,-1", "eight", "4,,8"])
def test_counts_must_be_whole_and_positive(text):
    with pytest.raises(UsageError):
        parse_counts(text, "--stages")


def test_costs_follow_the_rank_count_by_layers_per_rank():
    costs = model()
    four = costs.costs_for(4)
    eight = PROFILE.rank_costs(8)[0]
    assert len(four) == 4
    assert four[0].F == pytest.approx(2 * eight.F) and four[0].activation == pytest.approx(2 * eight.activation)
    assert costs.costs_for(8)[0] == eight
    assert costs.memory_unit == "GB"
    assert from_dict(to_dict(costs)) == costs


def test_a_store_made_before_fused_backward_times_keeps_its_settings():
    # the committed 1.5B store was written before cost records had BW: a rerun must match it
    with sqlite3.connect(REPO_ROOT / "benchmarks" / "sweep" / "zb-1.5b.db") as db:
        stored = json.loads(db.execute("SELECT settings FROM sweep").fetchone()[0])["costs"]
    assert to_dict(model())["rank_costs"] == stored["rank_costs"]
    fused = cost_model(None, [StageCost(1, 1, 1, fused=1.5)], 1, 0.0, True, None, "ms")
    assert to_dict(fused)["rank_costs"][0]["fused"] == 1.5 and from_dict(to_dict(fused)) == fused


def test_the_first_stage_and_the_per_op_overhead_follow_every_point():
    from dataclasses import replace

    from zbsolve.sweep.grid import Point

    costs = replace(model(), first_stage=(("B", 0.0), ("W", 20.0)), op_overhead=0.5)
    four = problem_of(Point(4, "vshape", 8, "none", "makespan"), costs)
    rank = costs.costs_for(4)[0]  # a rank-stage at P=4: twice P=8's layers, and so the first stage's
    assert costs.first_stage_for(4) == {"B": 0.0, "W": 40.0} and costs.first_stage_for(8) == {"B": 0.0, "W": 20.0}
    assert four.stage_costs[0].B == 0.5 and four.stage_costs[0].W == pytest.approx(40.0 / 2 + 0.5)  # a V's chunk
    assert four.stage_costs[7].B == pytest.approx(rank.B / 2 + 0.5) and four.op_overhead == 0.5
    assert from_dict(json.loads(json.dumps(to_dict(costs)))) == costs
    assert "first_stage" not in to_dict(model()) and "op_overhead" not in to_dict(model())


def test_without_the_models_layers_other_rank_counts_are_refused():
    bare = cost_model(PROFILE, PROFILE.rank_costs(8), 8, 0.0, True, None, "ms")
    bare = type(bare)(**{**bare.__dict__, "layers": None})
    with pytest.raises(UsageError, match="model.layers"):
        bare.costs_for(4)
    assert model(profile=None).costs_for(3) == [StageCost(1, 1, 1, 1, 0.5)] * 3  # flags: the same per rank


def test_every_combination_is_a_point_and_checked_before_any_solve():
    grid = points([4, 8], ["single", "vshape"], [8, 16], ["1x", "2x"], ["makespan"], model())
    assert len(grid) == 16 and len({p.key for p in grid}) == 16
    assert problem_of(grid[0], model()).devices == 4
    with pytest.raises(UsageError):
        points([3], ["bidirectional"], [8], ["1x"], ["makespan"], model(profile=None))  # odd ranks
    with pytest.raises(UsageError):
        points([4], ["diagonal"], [8], ["1x"], ["makespan"], model())
    with pytest.raises(UsageError):
        points([4], ["single"], [8], ["1x"], ["fastest"], model())
    with pytest.raises(UsageError):
        points([4], ["single"], [8], ["lots"], ["makespan"], model())


def test_a_range_finer_than_four_digits_is_solved_once_per_distinct_limit_and_said(capsys, tmp_path):
    from zbsolve.cli import main
    from zbsolve.sweep.grid import range_steps

    limits = parse_memory_grid("0.5x:2x:9999")
    assert len(limits) == len(set(limits)) == 4334 and range_steps("0.5x:2x:9999") == 9999
    assert parse_memory_grid("1x:1.0001x:5") == ["1x"]
    assert main(["sweep", "-p", "2", "--placements", "single", "-m", "2", "--memory", "1x:1.0001x:5",
                 "--time-limit", "0.2", "--store", str(tmp_path / "s.db")]) == 0
    out, err = capsys.readouterr()
    assert "--memory 1x:1.0001x:5 gives 1 distinct limit, not 5" in err
    assert "zbsolve sweep: 1 point, 0.2 s each" in err and out.startswith("1 points solved now")
