"""Schedules from elsewhere on the command line: a torch compute_only CSV is read onto the
problem the options give, timed, validated, drawn, exported, compared and started from."""

import json

from helpers import REPO_ROOT

from zbsolve.cli import main

PROBLEM = ["--stages", "4", "--microbatches", "8", "--placement", "interleaved:2", "--memory", "1x",
           "--profile", str(REPO_ROOT / "models" / "zb-1.5b.json")]


def run(capsys, *args):
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def exported(capsys, tmp_path, name="interleaved-zb"):
    path = tmp_path / f"{name}.csv"
    code, _, err = run(capsys, "baseline", name, *PROBLEM, "--torch-csv", path)
    assert code == 0, err
    return path


def test_validate_plot_and_export_read_a_csv_on_the_problem_given(capsys, tmp_path):
    csv = exported(capsys, tmp_path)
    code, out, _ = run(capsys, "validate", csv, *PROBLEM)
    assert code == 0 and out.startswith(f"{csv}: valid interleaved-zb schedule (baseline): makespan ")
    code, _, err = run(capsys, "plot", csv, *PROBLEM, "-o", tmp_path / "p.png")
    assert code == 0, err
    assert (tmp_path / "p.png").stat().st_size > 0
    code, out, _ = run(capsys, "export", csv, *PROBLEM, "--format", "torch-csv", "-o", "-")
    assert code == 0 and out == csv.read_text()


def test_a_csv_without_a_problem_and_a_json_file_with_one_are_refused(capsys, tmp_path):
    csv = exported(capsys, tmp_path)
    code, _, err = run(capsys, "validate", csv)
    assert code == 2 and "holds no problem: give --stages" in err
    schedule = tmp_path / "s.json"
    assert run(capsys, "baseline", "interleaved-zb", *PROBLEM, "-o", schedule)[0] == 0
    code, _, err = run(capsys, "validate", schedule, *PROBLEM)
    assert code == 2 and "holds its problem" in err


def test_a_csv_of_other_stages_is_refused_in_one_line(capsys, tmp_path):
    csv = exported(capsys, tmp_path)
    code, _, err = run(capsys, "validate", csv, "--stages", "4", "--microbatches", "8")
    assert code == 1 and err.count("\n") == 1
    assert "row 1, action '4F0': stage 4, but the problem has stages 0-3" in err


def test_compare_shows_a_given_schedule_and_solve_starts_from_it(capsys, tmp_path):
    csv = exported(capsys, tmp_path)
    code, out, _ = run(capsys, "compare", *PROBLEM, "--no-solve", "--schedule", csv)
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("interleaved-zb.csv "))
    ours = next(line for line in out.splitlines() if line.startswith("interleaved-zb "))
    assert row.split()[1] == ours.split()[1]  # the same makespan
    target = tmp_path / "solved.json"
    code, out, _ = run(capsys, "solve", *PROBLEM, "--start", csv, "--time-limit", "2", "--workers", "1", "-q",
                       "-o", target)
    assert code == 0 and "interleaved-zb.csv" in out
    solved = json.loads(target.read_text())["metrics"]["makespan"]
    assert solved <= float(row.split()[1]) + 1e-9


def test_a_start_of_another_problem_is_refused_before_solving(capsys, tmp_path):
    schedule = tmp_path / "other.json"
    assert run(capsys, "baseline", "1f1b", "--stages", "4", "--microbatches", "8", "-o", schedule)[0] == 0
    code, out, err = run(capsys, "solve", *PROBLEM, "--start", schedule, "-q")
    assert code == 2 and "is a schedule of another problem" in err and out == ""
