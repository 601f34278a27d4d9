"""What the table leads with, how its numbers line up, what `compare` writes, and
`--fb-overlap` as a share of F + B."""

import csv
import json

import pytest
from helpers import REPO_ROOT, uniform

from zbsolve.baselines import run_baseline
from zbsolve.cli import main
from zbsolve.cli.table import _column, comparison_table
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.schedule.validator import validate

PROFILE = str(REPO_ROOT / "models" / "zb-1.5b.json")


def test_a_column_shows_one_number_of_decimals():
    assert _column([1310.406, 1432.71, None, 27.0]) == ["1310.41", "1432.71", "-", "27.00"]
    assert _column([27.0, 33.0]) == ["27", "33"]
    assert _column([0.125, 10.0]) == ["0.125", "10.000"]


def test_the_table_leads_with_the_objective_and_its_bound_and_gap():
    problem = uniform(4, 8, memory="2x", objective="span")
    rows = [run_baseline(name, problem) for name in ("1f1b", "zb-h2")]
    table = comparison_table(rows, rows[0])
    header = table.splitlines()[0].split()
    assert header[:7] == ["schedule", "span", "(ms)", "bound", "gap", "makespan", "(ms)"]
    h2 = table.splitlines()[3].split()
    assert h2[0] == "zb-h2" and float(h2[1]) == rows[1].metrics.span == 24
    assert float(h2[4]) == rows[1].metrics.makespan == 27


def test_compare_writes_every_fitting_schedule_and_the_table(tmp_path, capsys):
    folder, table = tmp_path / "all", tmp_path / "table.csv"
    code = main(["compare", "-p", "4", "-m", "8", "--memory", "1x", "--time-limit", "2", "--workers", "1", "-q",
                 "-o", str(folder), "--table", str(table)])
    assert code == 0
    err = capsys.readouterr().err
    assert "gpipe is not written: it breaks the memory limit" in err
    written = sorted(p.stem for p in folder.glob("*.json"))
    assert written == ["1f1b", "solved", "zb-auto", "zb-h1"]
    for path in folder.glob("*.json"):
        validate(read_schedule(path))
    rows = list(csv.DictReader(table.open()))
    assert [r["schedule"] for r in rows] == ["solved", "gpipe", "1f1b", "zb-h1", "zb-h2", "zb-auto"]
    assert rows[2]["value"] == "33.0" and rows[2]["peak_memory"] == "4 3 2 1" and rows[1]["fits"] == "False"
    as_json = tmp_path / "table.json"
    assert main(["compare", "-p", "4", "-m", "8", "--no-solve", "--table", str(as_json)]) == 0
    assert [r["schedule"] for r in json.loads(as_json.read_text())][:2] == ["gpipe", "1f1b"]


@pytest.mark.parametrize("args, message", [
    (["--table", "t.txt"], "must end in .csv or .json"),
    (["-o", "FILE"], "not a folder"),
])
def test_compare_outputs_are_checked_before_any_work(tmp_path, capsys, args, message):
    (tmp_path / "FILE").write_text("x")
    args = [str(tmp_path / a) if a in ("t.txt", "FILE") else a for a in args]
    assert main(["compare", "-p", "4", "-m", "8", "--time-limit", "60", *args]) == 2
    out = capsys.readouterr()
    assert message in out.err and out.out == ""


def test_fb_overlap_as_a_share_of_f_plus_b(capsys):
    from zbsolve.cli import build_parser
    from zbsolve.cli.options import problem_from_args

    def problem(*extra):
        return problem_from_args(build_parser().parse_args(
            ["compare", "-p", "4", "-m", "8", "--placement", "vshape", "--F", "2", "--B", "3", "--W", "1", *extra]))

    assert problem("--fb-overlap", "80%").fb_overlap == pytest.approx(0.8 * (1 + 1.5) + 0.5)  # per chunk: halves
    assert problem("--fb-overlap", "0.5x").fb_overlap == pytest.approx(0.5 * 2.5 + 0.5)
    assert problem("--fb-overlap", "2.25").fb_overlap == 2.25
    for bad, says in (("120%", "at most 100%"), ("0x", "above 0"), ("fast", "a time or a share")):
        assert main(["compare", "-p", "4", "-m", "8", "--placement", "vshape", "--no-solve", "--fb-overlap", bad]) == 2
        assert says in capsys.readouterr().err
    assert main(["compare", "--profile", str(REPO_ROOT / "models" / "zb-p8-heterogeneous.json"), "--placement",
                 "vshape", "--no-solve", "--fb-overlap", "80%"]) == 2
    assert "same F, B and W on every stage" in capsys.readouterr().err
