"""`--partition` from the command line: a profile's layers grouped into stages, chosen with
the schedule (`solve --partition auto`), and the plan handed to torchtitan (`export --format
torchtitan`); what each refuses, by name."""

import json

import pytest
from helpers import layered_profile

from zbsolve.cli import main
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.schedule.validator import validate

QUICK = ["--time-limit", "2", "--workers", "1", "--deterministic", "-q"]


@pytest.fixture
def tiny(tmp_path):
    return layered_profile(tmp_path / "tiny.json", 6, 2.5)


def test_even_split_and_a_given_one(tiny, tmp_path, capsys):
    assert main(["solve", "--profile", tiny, *QUICK, "-o", str(tmp_path / "even.json")]) == 0
    even = read_schedule(tmp_path / "even.json")
    assert even.problem.partition == (4, 4)  # three layers each, the embedding first and the head last
    assert even.problem.stage_modules[1] == ("layers.3", "layers.4", "layers.5", "norm", "lm_head")
    assert even.problem.stage_costs[1].F == pytest.approx(3 * 2.0 + 5.0)
    assert main(["solve", "--profile", tiny, "--partition", "5,3", *QUICK, "-o", str(tmp_path / "given.json")]) == 0
    given = read_schedule(tmp_path / "given.json")
    validate(given)
    assert given.problem.partition == (5, 3) and given.value < even.value  # the heavy head wants fewer layers


def test_auto_answers_with_a_bound_over_every_split(tiny, tmp_path, capsys):
    assert main(["solve", "--profile", tiny, "--partition", "auto", "--memory", "1x", *QUICK,
                 "-o", str(tmp_path / "auto.json")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("partition (layers per stage)")
    assert any(line.startswith("4,4 ") and line.rstrip().endswith("even optimal") for line in lines)
    answer = next(line for line in lines if line.startswith("answer: partition"))
    auto = read_schedule(tmp_path / "auto.json")
    validate(auto)
    assert f"answer: partition {','.join(map(str, auto.problem.partition))}" in answer
    assert "every one of the 7 splits solved" in answer or "of 7 splits solved" in answer
    value = float(answer.split("), ")[1].split(" ")[0])
    bound = float(answer.split("take less than ")[1].split(" ")[0])
    assert value == pytest.approx(auto.value, rel=1e-5) and bound <= value


@pytest.mark.parametrize("words, message", [
    (["--partition", "even", "--stages", "2", "--microbatches", "4"], "--partition needs a --profile that lists"),
    (["--profile", "zb-1.5b", "--partition", "auto"], "--partition needs a --profile that lists layers"),
    (["--partition", "auto", "--placement", "single,vshape"], "one placement at a time"),
    (["--partition", "auto", "--fb-overlap", "3"], "does not take --fb-overlap"),
    (["--partition", "4,3,1"], "gives 3 stages; this placement has 2"),
    (["--F", "2"], "--F does not apply to a profile that lists layers"),
    (["--partition", "auto", "--least-memory"], "does not take --least-memory"),
    (["--partition", "auto", "--objective", "span"], "it takes --objective makespan"),
])
def test_what_partition_refuses(tiny, capsys, words, message):
    words = [w if w != "PROFILE" else tiny for w in words]
    profile = [] if "--profile" in words or "--stages" in words else ["--profile", tiny]
    assert main(["solve", *profile, *words, *QUICK]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["compare", "baseline"])
def test_auto_is_for_solve_only(tiny, capsys, command):
    words = ["baseline", "1f1b"] if command == "baseline" else ["compare", "--no-solve"]
    assert main([*words, "--profile", tiny, "--partition", "auto"]) == 2
    assert f"use zbsolve solve; zbsolve {command} takes even" in capsys.readouterr().err


def test_export_for_torchtitan_and_what_it_refuses(tiny, tmp_path, capsys):
    plan = str(tmp_path / "plan.json")
    assert main(["solve", "--profile", tiny, "--placement", "vshape", "--partition", "2,2,2,2", *QUICK,
                 "-o", plan]) == 0
    assert main(["export", plan, "--format", "torchtitan", "-o", str(tmp_path / "titan"),
                 "--module-names", "embed,block.{0..5},final+head", "--microbatch-size", "3"]) == 0
    fragment = json.loads((tmp_path / "titan" / "torchtitan.json").read_text())
    assert fragment["parallelism"]["module_fqns_per_model_part"] == [
        ["embed", "block.0"], ["block.1", "block.2"], ["block.3", "block.4"], ["block.5", "final", "head"]]
    assert fragment["parallelism"]["pipeline_parallel_schedule"] == "ZBVZeroBubble"
    assert fragment["training"] == {"local_batch_size": 12}
    assert (tmp_path / "titan" / "schedule.csv").read_text().startswith("0F0,")
    capsys.readouterr()
    assert main(["export", plan, "--format", "torchtitan", "-o", str(tmp_path / "t2"),
                 "--module-names", "embed,block.{0..4},head"]) == 2
    assert "--module-names gives 7 layers; the plan's partition has 8" in capsys.readouterr().err
    bidirectional = str(tmp_path / "bi.json")
    assert main(["solve", "--profile", tiny, "--placement", "bidirectional", *QUICK, "-o", bidirectional]) == 0
    assert main(["export", bidirectional, "--format", "torchtitan", "-o", str(tmp_path / "t3")]) == 2
    assert "DualPipeV's placement" in capsys.readouterr().err
    plain = str(tmp_path / "plain.json")
    assert main(["solve", "--stages", "2", "--microbatches", "4", *QUICK, "-o", plain]) == 0
    assert main(["export", plain, "--format", "torchtitan", "-o", str(tmp_path / "t4")]) == 2
    assert "not a profile's layers" in capsys.readouterr().err
    assert not (tmp_path / "t2").exists() and not (tmp_path / "t3").exists()
