"""A plan keeps the fingerprint of the profile it was solved from; `zbsolve run` refuses a
profile that is neither that one nor the one whose run calibrated it."""

import json

import pytest
from helpers import REPO_ROOT

from zbsolve.cli import main
from zbsolve.formats.schedule_json import json_schema, read_schedule
from zbsolve.problem.profiles import load_profile

TINY = {"name": "tiny", "source": "test", "memory_unit": "MB", "model": {"layers": 1, "hidden": 16, "heads": 2,
        "sequence": 8, "microbatch_size": 1}, "costs": {"F": 1, "B": 1, "W": 1, "activation": 2}}


def solved_plan(tmp_path, profile: dict, name: str = "plan.json"):
    path = tmp_path / f"{profile['name']}.json"
    path.write_text(json.dumps(profile))
    plan = tmp_path / name
    assert main(["baseline", "zb-h1", "--profile", str(path), "-p", "2", "-m", "4", "-o", str(plan)]) == 0
    return path, plan


def test_the_plan_names_its_profile_and_the_schema_allows_it(tmp_path, capsys):
    import jsonschema

    profile, plan = solved_plan(tmp_path, TINY)
    fingerprint = load_profile(profile).fingerprint
    assert fingerprint.startswith("tiny:") and len(fingerprint) == len("tiny:") + 12
    assert read_schedule(plan).problem.profile == fingerprint
    jsonschema.validate(json.loads(plan.read_text()), json_schema())
    changed = dict(TINY, costs={"F": 1, "B": 1, "W": 1.5, "activation": 2})
    (tmp_path / "changed.json").write_text(json.dumps(changed))
    assert load_profile(tmp_path / "changed.json").fingerprint != fingerprint  # one number differs


def test_run_refuses_another_profile_before_starting_any_rank(tmp_path, capsys):
    _, plan = solved_plan(tmp_path, TINY)
    code = main(["run", str(plan), "--profile", str(REPO_ROOT / "models" / "zb-6.2b.json"), "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{plan} was solved from profile tiny:" in err and "--profile" in err and "is zb-6.2b:" in err
    assert "running" not in err  # refused before any process started


def test_a_profile_calibrated_from_a_run_keeps_the_stack_s_profile_in_its_plans(tmp_path):
    from zbsolve.cli.run import check_plan_profile
    from zbsolve.errors import UsageError

    stack, plan = solved_plan(tmp_path, TINY)
    calibrated = dict(TINY, name="calibrated", calibrated_from=read_schedule(plan).problem.profile)
    calibrated_path, calibrated_plan = solved_plan(tmp_path, calibrated, "calibrated-plan.json")
    made_from = read_schedule(calibrated_plan).problem.profile
    assert made_from.startswith("calibrated:") and made_from.endswith(f" from {load_profile(stack).fingerprint}")
    planned = read_schedule(calibrated_plan)
    check_plan_profile(planned, load_profile(stack), "p", "s")  # the run's stack
    check_plan_profile(planned, load_profile(calibrated_path), "p", "s")  # its own
    with pytest.raises(UsageError, match="run a plan with its own profile"):
        check_plan_profile(planned, load_profile(REPO_ROOT / "models" / "zb-1.5b.json"), "p", "s")
