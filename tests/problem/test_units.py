"""Memory in the user's units: 40GB, 40G, 38GiB, 150%; the unit carried to headers, tables,
plots and files; amounts with a unit refused where the costs have none."""

import pytest
from helpers import REPO_ROOT, uniform

from zbsolve.baselines import run_baseline
from zbsolve.cli import main
from zbsolve.errors import ProblemError
from zbsolve.formats.schedule_json import read_schedule, schedule_to_dict, write_schedule
from zbsolve.problem.placements import build_problem
from zbsolve.problem.problem import StageCost
from zbsolve.problem.units import amount_in, bytes_per, copy_time

PROFILE = str(REPO_ROOT / "models" / "zb-1.5b.json")


@pytest.mark.parametrize("text, unit, amount", [
    ("40GB", "GB", 40.0), ("40G", "GB", 40.0), ("40 gb", "GB", 40.0), ("2GiB", "GB", 2 * 2**30 / 1e9),
    ("512MB", "GB", 0.512), ("1.5TB", "MB", 1.5e6), ("300kB", "MB", 0.3), ("4096KiB", "MiB", 4.0),
])
def test_amounts_convert_into_the_costs_unit(text, unit, amount):
    assert amount_in(text, unit) == pytest.approx(amount, rel=1e-12)


def test_a_plain_number_or_a_factor_names_no_unit():
    assert amount_in("40", "GB") is None and amount_in("1.5x", "GB") is None
    assert bytes_per("units") is None and bytes_per("GiB") == 2**30


@pytest.mark.parametrize("text, unit, says", [
    ("40GB", None, "in no named unit"), ("40GB", "units", "not a byte unit"), ("40 furlongs", "GB", "unknown unit"),
])
def test_a_unit_the_costs_cannot_take_is_refused(text, unit, says):
    with pytest.raises(ProblemError, match=says):
        amount_in(text, unit)


def test_limits_in_percent_and_in_bytes_give_the_same_problem_as_the_factor():
    cost = StageCost(1, 1, 1, 3.4, 1.2)
    limits = {text: build_problem(8, 16, cost, memory=text, memory_unit_name="GB").memory_limit
              for text in ("1.5x", "150%", f"{1.5 * 8 * 3.4}GB", f"{1.5 * 8 * 3.4 * 1000}MB")}
    assert all(v == pytest.approx(limits["1.5x"]) for v in limits.values())
    per_device = build_problem(2, 4, cost, memory="10GB,8000MB", memory_unit_name="GB").memory_limit
    assert per_device == pytest.approx((10.0, 8.0))


def test_the_unit_travels_with_the_schedule_file(tmp_path):
    problem = uniform(4, 8, memory="6GB", memory_unit_name="GB")
    schedule = run_baseline("zb-h1", problem)
    assert schedule_to_dict(schedule)["problem"]["memory_unit"] == "GB"
    write_schedule(schedule, tmp_path / "s.json")
    assert read_schedule(tmp_path / "s.json").problem.memory_unit_name == "GB"
    assert "memory_unit" not in schedule_to_dict(run_baseline("zb-h1", uniform(4, 8)))["problem"]


def test_the_header_and_table_give_memory_in_the_profile_s_unit(capsys):
    assert main(["compare", "--profile", PROFILE, "--memory", "40GB", "--no-solve"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "memory limit 40 GB (1.47x U, U=27.1976 GB)" in out[0]
    assert "peak mem (GB)" in out[1]
    one_f = next(line for line in out if line.startswith("1f1b")).split()
    assert one_f[7] == "27.20"  # 1F1B's peak: 8 activations of 3.3997 GB on device 0
    assert main(["compare", "-p", "4", "-m", "8", "--memory", "40GB", "--no-solve"]) == 2
    assert "in no named unit" in capsys.readouterr().err
    assert main(["compare", "-p", "4", "-m", "8", "--memory", "6GB", "--memory-unit", "GB", "--no-solve"]) == 0
    assert "memory limit 6 GB" in capsys.readouterr().out


@pytest.mark.parametrize("text, bare", [("1.5", "1.5"), ("20,20GB", "20"), (" 7 ", "7")])
def test_a_bare_number_where_the_costs_count_bytes_is_refused_with_both_readings(text, bare):
    with pytest.raises(ProblemError) as refused:
        build_problem(2, 4, StageCost(1, 1, 1, 3, 1.5), memory=text, memory_unit_name="GB")
    said = str(refused.value)
    assert f"write {bare}x for {bare} times U" in said and f"or {bare}GB for an amount" in said


def test_a_bare_number_stays_an_amount_where_the_unit_is_no_byte_unit_or_a_number_is_given():
    cost = StageCost(1, 1, 1, 3, 1.5)
    assert build_problem(2, 4, cost, memory="7", memory_unit_name="units").memory_limit == (7.0, 7.0)
    assert build_problem(2, 4, cost, memory="7").memory_limit == (7.0, 7.0)
    assert build_problem(2, 4, cost, memory=7.0, memory_unit_name="GB").memory_limit == (7.0, 7.0)


@pytest.mark.parametrize("amount, unit, time_unit, bandwidth, expected", [
    (3, "GB", "ms", "25GB/s", 120.0),  # the README's 7B stage over PCIe
    (3, "GB", "s", "25 GB / s", 0.12),
    (512, "MiB", "us", "2GiB/s", 250_000.0),
])
def test_a_copy_s_time_is_its_bytes_over_the_bandwidth(amount, unit, time_unit, bandwidth, expected):
    assert copy_time(amount, unit, time_unit, bandwidth) == pytest.approx(expected)


@pytest.mark.parametrize("unit, time_unit, bandwidth, message", [
    ("GB", "ms", "25GB", "expected an amount per second"),
    ("GB", "ms", "0GB/s", "expected an amount per second above 0"),
    (None, "ms", "25GB/s", "needs the activation in a byte unit"),
    ("GB", "steps", "25GB/s", "needs times in s, ms, us or ns"),
])
def test_a_copy_s_time_refuses_what_it_cannot_convert(unit, time_unit, bandwidth, message):
    with pytest.raises(ProblemError, match=message):
        copy_time(1, unit, time_unit, bandwidth)
