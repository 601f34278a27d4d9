"""A fused backward's own time (`BW` in profiles and files): a runtime may fuse B and W more
cheaply than it splits them. Only a problem that fuses them times BW by it."""

import json
import re
from dataclasses import replace

import pytest
from helpers import uniform

from zbsolve.baselines import run_baseline
from zbsolve.cli import main
from zbsolve.errors import ProblemError, ValidationError
from zbsolve.formats.schedule_json import read_schedule, write_schedule
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import profile_from_dict
from zbsolve.schedule.validator import validate

FUSED = StageCost(1, 1, 1, 1, 0.5, fused=1.5)


def test_a_fused_problem_times_bw_by_its_own_time_a_split_one_by_b_plus_w():
    # P=2, M=2, F=1: device 1 runs F0 [1,2], BW0 [2,3.5], F1 [3.5,4.5], BW1 [4.5,6]; device 0
    # F0 F1, then BW0 [3.5,5] and BW1 [6,7.5]. With BW = B + W = 2: 9.
    fused = run_baseline("1f1b", build_problem(2, 2, FUSED, split_backward=False))
    validate(fused)
    assert fused.metrics.makespan == pytest.approx(7.5)
    split = run_baseline("1f1b", build_problem(2, 2, FUSED))
    validate(split)  # its bounds hold for every schedule: BW is B + W there
    assert split.metrics.makespan == pytest.approx(9.0)
    assert FUSED.backward_time(False) == 1.5 and FUSED.backward_time(True) == 2.0
    assert FUSED.scaled(0.5).fused == 0.75


def test_a_schedule_claiming_the_fused_time_on_a_split_problem_is_refused():
    fused = run_baseline("1f1b", build_problem(2, 2, FUSED, split_backward=False))
    with pytest.raises(ValidationError, match="its cost is 2"):
        validate(replace(fused, problem=build_problem(2, 2, FUSED)))


def test_bw_travels_through_profiles_and_schedule_files(tmp_path):
    profile = profile_from_dict({"name": "p", "source": "test", "costs": {"F": 1, "B": 1, "W": 1, "BW": 1.5},
                                 "overrides": [{"stage": 0, "BW": 1.25}]})
    first, second = profile.rank_costs(2)
    assert (first.fused, second.fused) == (1.25, 1.5)
    schedule = run_baseline("1f1b", build_problem(2, 2, [first, second], split_backward=False))
    write_schedule(schedule, tmp_path / "s.json")
    assert json.loads((tmp_path / "s.json").read_text())["problem"]["stage_costs"][0]["BW"] == 1.25
    assert read_schedule(tmp_path / "s.json").problem == schedule.problem
    assert "BW" not in json.loads(_written(tmp_path, uniform(2, 2)))["problem"]["stage_costs"][0]
    with pytest.raises(ProblemError, match="BW must be >= 0"):
        build_problem(2, 2, StageCost(1, 1, 1, 1, 0.5, fused=-1))


def _written(tmp_path, problem) -> str:
    write_schedule(run_baseline("1f1b", problem), tmp_path / "plain.json")
    return (tmp_path / "plain.json").read_text()


def test_the_table_says_what_1f1b_takes_with_the_fused_backward(tmp_path, capsys):
    path = tmp_path / "fused.json"
    path.write_text(json.dumps({"name": "f", "source": "test", "costs": {"F": 1, "B": 1, "W": 1, "BW": 1.5}}))
    assert main(["compare", "--profile", str(path), "--stages", "2", "--microbatches", "2", "--no-solve",
                 "--split-backward"]) == 0
    out = capsys.readouterr().out
    assert "BW=1.5" in out and "takes 7.5 ms against 9 ms above" in out
    # without --split-backward the fused backward is a choice of its own, its 1F1B a row
    assert main(["compare", "--profile", str(path), "--stages", "2", "--microbatches", "2", "--no-solve"]) == 0
    out = capsys.readouterr().out
    assert "placements single, single fused" in out
    assert re.search(r"^single fused: 1f1b +7\.5 ", out, re.MULTILINE)
    assert main(["compare", "--profile", str(path), "--stages", "2", "--microbatches", "2", "--no-solve",
                 "--B", "2"]) == 0
    assert "BW=" not in capsys.readouterr().out  # measured with the profile's B, it no longer holds
    assert main(["compare", "--stages", "2", "--microbatches", "2", "--no-solve"]) == 0
    assert "fused backward" not in capsys.readouterr().out
    # the split solve reaches 7 (F, B on device 1 while device 0 works, W's in the gaps): no hint
    args = ["compare", "--profile", str(path), "--stages", "2", "--microbatches", "2", "--time-limit", "2",
            "--workers", "1", "-q", "--split-backward"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "optimal" in out and "takes 7.5 ms" in out and "faster than the solve" not in out
    # with a fused backward of 1, 1F1B takes 6: faster than any split schedule, and said to be
    path.write_text(json.dumps({"name": "f", "source": "test", "costs": {"F": 1, "B": 1, "W": 1, "BW": 1}}))
    assert main(args) == 0
    assert "takes 6 ms against 9 ms above, where BW is B + W; that is faster than the solve: solve with " \
           "--no-split-backward" in capsys.readouterr().out
