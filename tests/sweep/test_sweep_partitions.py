"""`--partition` as a sweep's grid dimension: named and given splits per point, `auto` solved
with its bound over every split, points that keep their keys, and what is refused up front."""


import pytest
from helpers import layered_profile

from zbsolve.cli import main
from zbsolve.errors import UsageError
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.problem import partition
from zbsolve.problem.profiles import load_profile
from zbsolve.schedule.validator import validate
from zbsolve.sweep.grid import Point, cost_model, from_dict, parse_partition_grid, points, problem_of, to_dict
from zbsolve.sweep.store import Store


@pytest.fixture
def layered(tmp_path):
    """An embedding, three transformer layers and a heavy head: four splits over two stages."""
    return layered_profile(tmp_path / "layered.json", 3, 2.0)


def costs_of(path, **options):
    profile = load_profile(path)
    return cost_model(profile, [], 2, 0.0, True, None, "ms", **options)


def test_a_point_without_a_partition_keeps_the_key_stores_already_hold():
    assert Point(2, "single", 2, "1x", "makespan").key == "P=2 single M=2 memory=1x makespan"
    assert Point(2, "single", 2, "1x", "makespan", "auto").key == "P=2 single M=2 memory=1x makespan partition=auto"


def test_each_point_is_solved_on_the_split_it_names(layered):
    costs = costs_of(layered)
    assert from_dict(to_dict(costs)) == costs and costs.rank_costs == ()
    grid = points([2], ["single", "vshape"], [3], ["none"], ["makespan"], costs,
                  ["even", "torchtitan", "balanced"])
    assert [p.partition for p in grid] == ["even", "torchtitan", "balanced"] * 2
    layers = costs.layer_costs
    assert layers is not None
    for point in grid:
        stages = partition.stage_count(point.placement, 2, 3)
        expected = {"even": partition.even_split(layers, stages),
                    "torchtitan": partition.torchtitan_split(layers, stages),
                    "balanced": partition.balanced_split(layers, stages, True)}[point.partition or ""]
        problem = problem_of(point, costs)
        assert problem.partition == expected and sum(expected) == 5
        assert problem.stage_modules[-1][-2:] == ("norm", "lm_head")
    given = problem_of(Point(2, "single", 3, "none", "makespan", "3/2"), costs)
    assert given.partition == (3, 2)
    assert points([2], ["single"], [3], ["1x"], ["makespan"], costs)[0].partition == "even"  # the default


@pytest.mark.parametrize("grid, message", [
    (dict(partitions=["2/2"]), "--partition 2/2 places 4 layers; the profile has 5"),
    (dict(partitions=["1/1/3"]), "--partition 1/1/3 gives 3 stages; this placement has 2"),
    (dict(partitions=["auto"], objectives=["makespan", "span"]), "it takes --objective makespan"),
    (dict(partitions=["even"], placements=["vshape"], stages=[3]), "5 layers cannot fill 6 stages"),
])
def test_what_the_grid_refuses_before_anything_runs(layered, grid, message):
    settings = dict(stages=[2], placements=["single"], microbatches=[3], memories=["none"],
                    objectives=["makespan"], costs=costs_of(layered)) | grid
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        points(**settings)


@pytest.mark.parametrize("text", ["", "even,,auto", "4,4", "4-4", "uneven"])
def test_a_malformed_partition_list_is_refused(text):
    with pytest.raises(UsageError):
        parse_partition_grid(text)


def test_a_partition_needs_a_profile_that_lists_layers(capsys, tmp_path):
    assert main(["sweep", "--profile", "zb-1.5b", "--partition", "even", "--store", str(tmp_path / "s.db")]) == 2
    assert "--partition needs a --profile that lists layers" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def test_auto_finds_the_best_of_every_split_each_solved_alone(layered, tmp_path, capsys):
    store = tmp_path / "s.db"
    asked = "auto,1/4,2/3,3/2,4/1"
    assert main(["sweep", "--profile", layered, "--stages", "2", "--microbatches", "3", "--placements", "single",
                 "--memory", "1x", "--partition", asked, "--time-limit", "4", "--workers", "1",
                 "--deterministic", "--jobs", "1",
                 "-q", "--store", str(store), "--report"]) == 0
    shown = capsys.readouterr().out
    assert "single partition=auto" in shown and "single partition=4/1" in shown
    reader = Store(store)
    rows = {(r["partition"], r["name"]): r for r in reader.results()}
    states = {p["partition"]: p["status"] for p in reader.points()}
    reader.close()
    # 1/4 puts the head and three layers on one device: above the limit 1x gives the even split
    assert states == {"auto": "optimal", "1/4": "infeasible", "2/3": "optimal", "3/2": "optimal", "4/1": "optimal"}
    each = {split: rows[(split, "solved")] for split in ("2/3", "3/2", "4/1")}
    auto = rows[("auto", "solved")]
    best = min(r["value"] for r in each.values())
    assert auto["value"] == pytest.approx(best) and auto["bound"] == pytest.approx(best)  # proven over all splits
    assert ("auto", "even split, solved") in rows and ("auto", "1f1b") in rows  # on the chosen split
    chosen = read_schedule(auto["schedule_path"])
    validate(chosen)
    assert chosen.value == pytest.approx(best) and chosen.problem.partition in {(1, 4), (2, 3), (3, 2), (4, 1)}
    assert rows[("/".join(map(str, chosen.problem.partition)), "solved")]["value"] == pytest.approx(best)


def test_an_auto_point_where_no_split_fits_is_infeasible_with_every_split_proven(layered, tmp_path):
    store = tmp_path / "s.db"
    assert main(["sweep", "--profile", layered, "--stages", "2", "--microbatches", "3", "--placements", "single",
                 "--memory", "0.2x", "--partition", "auto", "--time-limit", "2", "--workers", "1",
                 "--deterministic", "--jobs", "1",
                 "-q", "--store", str(store)]) == 0
    reader = Store(store)
    (point,) = reader.points()
    reader.close()
    assert point["state"] == "done" and point["status"] == "infeasible"
    assert point["message"] == "no split of the layers fits the memory limit (all 4 proven)"
