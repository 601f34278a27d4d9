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
    assert ("drifts past 10%" in out) == ("to plan with what ran: zbsolve profile --from-run " in out)
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

    def took(rank, kind):  # a step is a sum of ops: the mean predicts it
        return statistics.mean(t.end - t.start for t in measured.devices[rank] if t.op.kind == kind)

    first, second = profile.rank_costs(2)
    for kind in "FBW":  # the second rank-stage as it ran; the first stage on its own
        assert getattr(second, kind) == pytest.approx(took(1, kind), rel=1e-5)
        assert profile.first_stage[kind] == pytest.approx(took(0, kind), rel=1e-5)
    speed = took(0, "F") / took(1, "F")  # the first rank-stage's ops beyond the first stage: the run's
    assert (first.F, first.B, first.W) == pytest.approx((took(0, "F"), second.B * speed, second.W * speed),
                                                        rel=1e-5)
    gaps = [b.start - a.end for ops in measured.devices for a, b in zip(ops, ops[1:])]
    assert 0 <= profile.op_overhead <= max(gaps) + 1e-4
    assert (profile.devices, profile.microbatches, profile.extra["memory_unit"]) == (2, 4, "MB")
    assert first.activation == 0.1 and profile.comm >= 0
    assert "op_overhead" in profile.extra["notes"]
    capsys.readouterr()
    assert main(["solve", "--profile", str(tmp_path / "cal.json"), "--time-limit", "2", "--workers", "1", "-q"]) == 0


def _as_run(plan, overhead: float):
    """The plan's ops as a run would record them: each op's first `overhead` a gap before it."""
    from dataclasses import replace

    from zbsolve.schedule.schedule import SolverInfo

    devices = tuple(tuple(replace(t, start=t.start + overhead) for t in ops) for ops in plan.devices)
    return replace(plan, devices=devices, solver=SolverInfo("run", status="measured", message="test"))


@pytest.mark.parametrize("placement", ["single", "vshape"])
def test_calibration_round_trips_a_profile_through_a_run_of_its_own_plan(placement):
    from zbsolve.problem.profiles import profile_from_dict
    from zbsolve.runtime.measured import calibrated_profile

    source = {"name": "p", "source": "test", "time_unit": "ms", "costs": {"F": 2, "B": 2, "W": 1, "BW": 2.5,
              "activation": 0.1, "residual": 0.05}, "first_stage": {"F": 2, "B": 0, "W": 2.5, "BW": 2.5},
              "op_overhead": 0.25}
    profile = profile_from_dict(source)

    def problem_of(p, placement, split=True):
        return build_problem(2, 4, p.rank_costs(2), placement=placement, first_stage=p.first_stage,
                             op_overhead=p.op_overhead, split_backward=split, memory_unit_name="MB")

    plan = run_baseline("zb-h1" if placement == "single" else "zb-v", problem_of(profile, placement))
    document = calibrated_profile(_as_run(plan, 0.25), "cal")
    assert document["op_overhead"] == 0.25 and document["comm"] == 0
    assert document["first_stage"] == source["first_stage"]
    for record in document["stage_costs"]:
        assert record == source["costs"]  # BW, which a split run does not time, from the plan
    calibrated = profile_from_dict(document)
    for where in ("single", "vshape"):
        assert problem_of(calibrated, where).stage_costs == problem_of(profile, where).stage_costs
    # a run of fused 1F1B times F and BW; B and W come from the plan at the speed it ran
    fused = run_baseline("1f1b", problem_of(profile, "single", split=False))
    document = calibrated_profile(_as_run(fused, 0.25), "cal")
    assert document["first_stage"] == source["first_stage"] and document["stage_costs"][1] == source["costs"]
    assert "rank-stage 1's B: the plan's" in document["notes"]


def test_a_plan_that_is_not_measured_is_refused_for_calibration(tmp_path, capsys):
    planned(tmp_path, "zb-h1", "single")
    assert main(["profile", "--from-run", str(tmp_path / "plan.json"), "-o", str(tmp_path / "cal.json")]) == 2
    assert "needs a measured schedule" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "plan.json"), "--steps", "1"]) == 2
    assert "--layers is required" in capsys.readouterr().err


def test_a_cuda_run_needs_a_gpu_per_rank(tmp_path, capsys):
    import torch

    planned(tmp_path, "zb-h1", "single")
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found >= 2:
        pytest.skip("this machine has a GPU per rank: test_a_cuda_run_keeps_the_plan_s_order runs it")
    assert main(["run", str(tmp_path / "plan.json"), *STACK, "--device", "cuda"]) == 2
    assert f"the plan has 2 ranks, this machine has {found} GPU" in capsys.readouterr().err


def test_a_cuda_run_keeps_the_plan_s_order(tmp_path, capsys):
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    plan = planned(tmp_path, "zb-h1", "single")
    assert main(["run", str(tmp_path / "plan.json"), *STACK, "--device", "cuda", "--steps", "2", "--warmup", "1",
                 "-o", str(tmp_path / "measured.json")]) == 0
    out = capsys.readouterr().out
    assert "allocator peak per rank: " in out and out.startswith("step: planned ")
    measured = read_schedule(tmp_path / "measured.json")
    validate(measured)
    assert [[str(t.op) for t in ops] for ops in measured.devices] == \
        [[str(t.op) for t in ops] for ops in plan.devices]
