"""zbsolve run: a plan executed by torch on two CPU processes, every op recorded; the
measured file keeps the plan's order and its rules; a profile calibrated from it holds the
run's medians. No timing is asserted: only what holds at any speed."""

import contextlib
import io
import statistics

import pytest

pytest.importorskip("torch")

from zbsolve.baselines import run_baseline  # noqa: E402
from zbsolve.cli import main  # noqa: E402
from zbsolve.formats.schedule_json import read_schedule, write_schedule  # noqa: E402
from zbsolve.problem.placements import build_problem  # noqa: E402
from zbsolve.problem.problem import StageCost  # noqa: E402
from zbsolve.problem.profiles import load_profile  # noqa: E402
from zbsolve.schedule.validator import validate  # noqa: E402

STACK = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "8", "--microbatch-size", "1"]


def planned(tmp_path, name, placement):
    problem = build_problem(2, 4, StageCost(1.0, 1.0, 0.5, 0.1, 0.05), placement=placement,
                            memory_unit_name="MB")
    plan = run_baseline(name, problem)
    write_schedule(plan, tmp_path / "plan.json")
    return plan


@pytest.fixture(scope="module")
def single_run(tmp_path_factory):
    """One run of a ZB-H1 plan, shared: a run takes seconds of two processes."""
    folder = tmp_path_factory.mktemp("single")
    plan = planned(folder, "zb-h1", "single")
    out = folder / "out.txt"
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = main(["run", str(folder / "plan.json"), *STACK, "--steps", "2", "--warmup", "1",
                     "-o", str(folder / "measured.json"), "--trace", str(folder / "run.json")])
    out.write_text(captured.getvalue())
    return folder, plan, code


def vshape_run(tmp_path):
    plan = planned(tmp_path, "zb-v", "vshape")
    code = main(["run", str(tmp_path / "plan.json"), *STACK, "--steps", "2", "--warmup", "1",
                 "-o", str(tmp_path / "measured.json"), "--trace", str(tmp_path / "run.json")])
    return tmp_path, plan, code


@pytest.mark.parametrize("placement", ["single", "vshape"])
def test_a_run_keeps_the_plan_s_order_and_says_how_it_compares(tmp_path, capsys, single_run, placement):
    if placement == "single":
        tmp_path, plan, code = single_run
        out = (tmp_path / "out.txt").read_text()
    else:
        tmp_path, plan, code = vshape_run(tmp_path)
        out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("step: planned ") and "F: measured " in out and "W: measured " in out
    assert "drifts past 10%" in out or "plan and run agree" in out
    measured = read_schedule(tmp_path / "measured.json")
    assert measured.solver.status == "measured" and measured.problem == plan.problem
    validate(measured)  # every op once on its device, one at a time as listed, after its inputs
    assert [[str(t.op) for t in ops] for ops in measured.devices] == \
        [[str(t.op) for t in ops] for ops in plan.devices]  # the order torch ran is the plan's
    assert (tmp_path / "run.json").read_text().startswith("{")


def test_a_profile_calibrated_from_a_run_holds_its_medians(tmp_path, capsys, single_run):
    folder, _, code = single_run
    assert code == 0
    assert main(["profile", "--from-run", str(folder / "measured.json"), "-o", str(tmp_path / "cal.json")]) == 0
    measured = read_schedule(folder / "measured.json")
    profile = load_profile(tmp_path / "cal.json")
    # each rank-stage's median op time per kind, plus one runtime overhead per op, the same
    # for every kind and rank and no more than the largest gap between two ops of a rank
    overheads = []
    for rank, ops in enumerate(measured.devices):
        cost = profile.rank_costs(2)[rank]
        for kind in "FBW":
            took = statistics.median(t.end - t.start for t in ops if t.op.kind == kind)
            overheads.append(getattr(cost, kind) - took)
    gaps = [b.start - a.end for ops in measured.devices for a, b in zip(ops, ops[1:])]
    assert max(overheads) - min(overheads) < 1e-4  # the profile keeps six digits
    assert -1e-4 <= overheads[0] <= max(gaps) + 1e-4
    assert (profile.devices, profile.microbatches, profile.extra["memory_unit"]) == (2, 4, "MB")
    assert profile.rank_costs(2)[0].activation == 0.1 and profile.comm >= 0
    assert "overhead" in profile.extra["notes"]
    capsys.readouterr()
    assert main(["solve", "--profile", str(tmp_path / "cal.json"), "--time-limit", "2", "--workers", "1", "-q"]) == 0


def test_a_fused_run_calibrates_f_and_bw_and_keeps_the_plan_s_b_and_w(tmp_path):
    from dataclasses import replace

    from zbsolve.runtime.measured import calibrated_profile
    from zbsolve.schedule.schedule import SolverInfo

    # 1F1B's ops as if they ran on the plan's times: every gap between ops is 0 (no overhead)
    problem = build_problem(2, 4, StageCost(1.0, 1.0, 0.5, 0.1, 0.05, fused=1.25), split_backward=False)
    ran = replace(run_baseline("1f1b", problem), solver=SolverInfo("run", status="measured", message="test"))
    document = calibrated_profile(ran, "cal")
    for record in document["stage_costs"]:
        assert (record["F"], record["BW"], record["B"], record["W"]) == (1.0, 1.25, 1.0, 0.5)
    assert "F, BW from the run" in document["notes"]


def test_a_plan_that_is_not_measured_is_refused_for_calibration(tmp_path, capsys):
    planned(tmp_path, "zb-h1", "single")
    assert main(["profile", "--from-run", str(tmp_path / "plan.json"), "-o", str(tmp_path / "cal.json")]) == 2
    assert "needs a measured schedule" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "plan.json"), "--steps", "1"]) == 2
    assert "--layers is required" in capsys.readouterr().err
