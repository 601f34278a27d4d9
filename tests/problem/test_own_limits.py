"""`Nx` against 1F1B's peak, and `Nx-own`: each device limited to N times its own 1F1B peak,
for stages that differ."""

import pytest
from helpers import REPO_ROOT, uniform

from zbsolve.baselines import run_baseline
from zbsolve.errors import ProblemError
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.profiles import load_profile
from zbsolve.schedule.validator import validate
from zbsolve.solvers import solve


@pytest.mark.parametrize("P, M", [(4, 8), (4, 2), (8, 24)])
def test_one_x_own_is_each_device_s_1f1b_peak(P, M):
    problem = uniform(P, M, activation=2.0, memory="1x-own")
    assert list(problem.memory_limit) == [2.0 * min(P - d, M) for d in range(P)]
    assert list(run_baseline("1f1b", problem).metrics.peak_memory) == list(problem.memory_limit)
    assert uniform(P, M, memory="1.5x-own").memory_limit == pytest.approx([1.5 * min(P - d, M) for d in range(P)])


def test_chunked_placements_count_a_device_s_chunks_together():
    problem = uniform(4, 8, placement="vshape", activation=2.0, memory="1x-own")
    assert list(problem.memory_limit) == [8.0, 6.0, 4.0, 2.0]


def test_zb_h1_fits_one_x_but_not_each_device_s_own_one_x():
    # The papers' 1x is the first device's 1F1B peak: ZB-H1 keeps it there and holds more further on.
    assert not run_baseline("zb-h1", uniform(4, 8, memory="1x")).over_memory_limit()
    assert run_baseline("zb-h1", uniform(4, 8, memory="1x-own")).over_memory_limit() == [1, 2, 3]


def test_the_heavy_ends_solve_keeps_every_device_within_its_own_1f1b_peak():
    profile = load_profile(REPO_ROOT / "models" / "zb-1.5b-heavy-ends.json")
    problem = build_problem(8, 24, profile.rank_costs(8), comm=profile.comm, memory="1x-own")
    solved = solve(problem, "cpsat", time_limit=5, workers=1)
    validate(solved)
    own = run_baseline("1f1b", problem).metrics.peak_memory
    assert all(peak <= limit + 1e-9 for peak, limit in zip(solved.metrics.peak_memory, own))
    assert solved.value <= run_baseline("1f1b", problem).value


def test_one_x_is_what_1f1b_holds_at_most_when_stages_differ():
    # heavy ends: the LM-head device leaves 1.5x the activation, but under 1F1B it holds one
    # microbatch while device 0 holds eight: 1x is device 0's peak, not 8 LM-head activations
    profile = load_profile(REPO_ROOT / "models" / "zb-1.5b-heavy-ends.json")
    problem = build_problem(8, 24, profile.rank_costs(8), comm=profile.comm, memory="1x")
    one_f_one_b = run_baseline("1f1b", problem).metrics
    assert problem.memory_limit == (pytest.approx(8 * 3.3997),) * 8 == (max(one_f_one_b.peak_memory),) * 8
    assert one_f_one_b.peak_memory_x == pytest.approx(1.0)
    # fewer microbatches than devices: 1F1B holds M on device 0, not P
    assert uniform(8, 3, memory="1x").memory_limit == (3.0,) * 8
    assert run_baseline("1f1b", uniform(8, 3)).metrics.peak_memory_x == pytest.approx(1.0)


@pytest.mark.parametrize("text", ["0x-own", "-1x-own", "abcx-own"])
def test_a_bad_factor_is_refused(text):
    with pytest.raises(ProblemError):
        build_problem(4, 8, StageCost(1, 1, 1, 1, 0.5), memory=text)
    with pytest.raises(ProblemError, match="0 on a device"):
        build_problem(2, 2, [StageCost(1, 1, 1, 1, 0.5), StageCost(1, 1, 1, 0, 0)], memory="1x-own")


def test_the_header_and_the_rows_show_each_device_s_own_limit(capsys):
    from zbsolve.cli import main

    assert main(["baseline", "1f1b", "--stages", "4", "--microbatches", "8", "--memory", "1x-own"]) == 0
    out = capsys.readouterr().out
    assert "memory limits 4, 3, 2, 1 per device (the largest 1x U, U=4)" in out
    assert "1f1b: peak memory per device against its own limit: 4/4, 3/3, 2/2, 1/1" in out
    assert main(["solve", "--stages", "4", "--microbatches", "8", "--memory", "1x-own", "--time-limit", "2",
                 "--workers", "1", "-q"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("solved: peak memory per device"))
    pairs = [pair.split("/") for pair in line.split(": ")[-1].split(", ")]
    assert [float(limit) for _, limit in pairs] == [4, 3, 2, 1]
    assert all(float(peak) <= float(limit) for peak, limit in pairs)
