"""The command line: real output, exit codes, one-line errors, nothing written on failure."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from zbsolve.cli import main
from zbsolve.formats.schedule_json import read_schedule
from zbsolve.schedule.validator import validate

ROOT = REPO_ROOT
PROFILE = str(ROOT / "models" / "zb-1.5b.json")


def run(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_baseline_prints_and_writes_a_valid_file(capsys, tmp_path):
    target = tmp_path / "h1.json"
    code, out, _ = run(capsys, "baseline", "zb-h1", "--stages", "4", "--microbatches", "8", "-o", str(target))
    assert code == 0
    assert "zb-h1" in out and " 27 " in out
    code, out, _ = run(capsys, "validate", str(target))
    assert code == 0 and "valid zb-h1 schedule" in out


def test_compare_on_the_zero_bubble_profile_lists_every_baseline(capsys, tmp_path):
    code, out, _ = run(capsys, "compare", "--stages", "8", "--microbatches", "24", "--profile", PROFILE,
                       "--time-limit", "5", "-q")
    assert code == 0
    rows = [line.split()[0] for line in out.splitlines()[3:]]
    assert rows == ["solved", "gpipe", "1f1b", "zb-h1", "zb-h2", "zb-auto"]
    for name in rows[1:]:
        path = tmp_path / f"{name}.json"
        assert run(capsys, "baseline", name, "--stages", "8", "--microbatches", "24",
                   "--profile", PROFILE, "-o", str(path))[0] == 0
        assert run(capsys, "validate", str(path))[0] == 0


@pytest.mark.parametrize("name, placement, extra", [
    ("interleaved", "interleaved:2", []),
    ("zb-v", "vshape", []),
    ("dualpipe", "bidirectional", ["--fb-overlap", "2.4"]),
    ("dualpipev", "vshape", ["--fb-overlap", "1.2"]),
])
def test_placement_baselines_write_files_that_validate(capsys, tmp_path, name, placement, extra):
    path = tmp_path / f"{name}.json"
    code, out, _ = run(capsys, "baseline", name, "--stages", "4", "--microbatches", "8",
                       "--placement", placement, *extra, "-o", str(path))
    assert code == 0 and name in out
    assert run(capsys, "validate", str(path))[0] == 0


def test_solve_with_overlap_writes_pairs_that_validate_and_export(capsys, tmp_path):
    out_json, out_csv = tmp_path / "v.json", tmp_path / "v.csv"
    code, out, _ = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--placement", "vshape",
                       "--fb-overlap", "1.2", "--time-limit", "3", "-q", "-o", str(out_json),
                       "--torch-csv", str(out_csv))
    assert code == 0
    data = json.loads(out_json.read_text())
    assert any(op.get("overlap") is not None for device in data["devices"] for op in device["ops"])
    assert "OVERLAP_F_B" in out_csv.read_text()
    assert run(capsys, "validate", str(out_json))[0] == 0


def test_solve_writes_schedule_and_torch_csv(capsys, tmp_path):
    out_json, out_csv = tmp_path / "a.json", tmp_path / "a.csv"
    code, out, _ = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--memory", "1x",
                       "-q", "-o", str(out_json), "--torch-csv", str(out_csv))
    assert code == 0
    solved = out.splitlines()[3].split()
    assert solved[:2] == ["solved", "27"] and "optimal" in solved
    data = json.loads(out_json.read_text())
    assert data["solver"]["status"] == "optimal" and data["metrics"]["makespan"] == 27
    assert len(out_csv.read_text().splitlines()) == 4


def test_validate_names_the_violated_op(capsys, tmp_path):
    path = tmp_path / "s.json"
    run(capsys, "baseline", "1f1b", "--stages", "2", "--microbatches", "2", "-o", str(path))
    data = json.loads(path.read_text())
    data["devices"][1]["ops"][0]["start"] = 0.5
    path.write_text(json.dumps(data))
    code, _, err = run(capsys, "validate", str(path))
    assert code == 1
    assert "F pipe 0 stage 1 microbatch 0 on device 1 [0.5, 2]" in err


def test_a_baseline_over_the_memory_limit_is_shown_but_not_written(capsys, tmp_path):
    """GPipe holds all 8 microbatches on device 0 (8 = 2x U) where the limit is 1x: the table
    flags it and a note says so; files of it would fail their own problem's validation."""
    args = ["baseline", "gpipe", "--stages", "4", "--microbatches", "8", "--memory", "1x"]
    code, out, err = run(capsys, *args)
    assert code == 0 and "over memory limit on device 0 (+3 more)" in out
    breaks = "gpipe breaks the memory limit: peak 8 (2x U) on device 0, limit 4 (1x U)"
    assert err == f"zbsolve baseline: note: {breaks}\n"
    target = tmp_path / "g.json"
    code, out, err = run(capsys, *args, "-o", str(target))
    assert code == 1 and "over memory limit" in out
    assert f"error: {breaks}; its files are not written" in err and not target.exists()


@pytest.mark.parametrize("args, notes", [
    (["compare", "-p", "4", "-m", "6", "--placement", "interleaved:2", "--no-solve"],
     ["interleaved is not in the table: it needs the number of microbatches (6) to be a multiple of the "
      "number of ranks (4)"]),
    (["compare", "-p", "3", "-m", "4", "--placement", "vshape", "--no-solve"],
     ["dualpipev is not in the table: it needs at least 2P = 6 microbatches, got 4"]),
    (["solve", "-p", "2", "-m", "4", "--no-split-backward", "--time-limit", "5", "-q"],
     [f"{name} is not in the table: it needs split_backward (B and W as separate ops)"
      for name in ("zb-h1", "zb-h2", "zb-auto")]),
    (["compare", "-p", "3", "-m", "6", "--placement", "vshape", "--no-solve"], []),
])
def test_the_table_says_which_baselines_of_its_placement_it_leaves_out(capsys, args, notes):
    code, out, err = run(capsys, *args)
    assert code == 0
    assert err == "".join(f"zbsolve {args[0]}: note: {note}\n" for note in notes)
    named = {line.split()[0] for line in out.splitlines()[3:]}
    assert not named & {note.split()[0] for note in notes}


def test_export_torch_csv(capsys, tmp_path):
    path, csv = tmp_path / "s.json", tmp_path / "s.csv"
    run(capsys, "baseline", "zb-h1", "--stages", "2", "--microbatches", "2", "-o", str(path))
    assert run(capsys, "export", str(path), "--format", "torch-csv", "-o", str(csv))[0] == 0
    assert csv.read_text() == "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n"



def test_export_to_standard_output_and_dash_elsewhere(capsys, tmp_path, monkeypatch):
    """`export -o -` writes to standard output; where standard output carries the table,
    '-' is refused instead of becoming a file named '-'."""
    monkeypatch.chdir(tmp_path)
    run(capsys, "baseline", "zb-h1", "--stages", "2", "--microbatches", "2", "-o", "s.json")
    code, out, _ = run(capsys, "export", "s.json", "--format", "torch-csv", "-o", "-")
    assert code == 0 and out == "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n"
    code, out, _ = run(capsys, "export", "s.json", "--format", "chrome-trace", "-o", "-")
    assert code == 0 and json.loads(out)["traceEvents"]
    code, out, err = run(capsys, "baseline", "1f1b", "--stages", "2", "--microbatches", "2", "-o", "-")
    assert code == 2 and "cannot write '-' here" in err and out == ""
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("option, target, message", [
    ("-o", ".", "it is a directory"),
    ("--plot", "absent/s.png", "folder absent does not exist"),
    ("--torch-csv", "absent/s.csv", "folder absent does not exist"),
])
def test_an_output_that_cannot_be_written_is_refused_before_solving(capsys, tmp_path, monkeypatch, option,
                                                                     target, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", option, target)
    assert code == 2 and out == ""
    assert f"zbsolve solve: error: cannot write {Path(target)}: {message}" in err
    assert sorted(tmp_path.iterdir()) == []


def test_torch_csv_of_two_pipes_is_refused_before_solving(capsys, tmp_path):
    target = tmp_path / "b.csv"
    code, out, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--placement", "bidirectional",
                         "--torch-csv", str(target))
    assert code == 2 and out == ""  # a usage error, like an unwritable output; nothing was solved
    assert "this problem has 2 pipes" in err and not target.exists()


def test_torch_csv_export_of_a_two_pipe_schedule_is_a_usage_error(capsys, tmp_path):
    path, target = tmp_path / "d.json", tmp_path / "d.csv"
    assert run(capsys, "baseline", "dualpipe", "--stages", "4", "--microbatches", "8", "--placement",
               "bidirectional", "-o", str(path))[0] == 0
    code, _, err = run(capsys, "export", str(path), "--format", "torch-csv", "-o", str(target))
    assert code == 2 and "this problem has 2 pipes" in err and not target.exists()

BAD = [
    (["--stages", "0", "--microbatches", "8"], "--stages"),
    (["--stages", "4", "--microbatches", "0"], "--microbatches"),
    (["--stages", "4", "--microbatches", "8", "--F", "-1"], "--F must be > 0, got -1"),
    (["--stages", "4", "--microbatches", "8", "--B", "-1"], "--B must be >= 0, got -1"),
    (["--stages", "4", "--microbatches", "8", "--F", "0"], "--F must be > 0, got 0"),
    # finite, but on the grid (x 10) or summed they overflowed a float (OverflowError)
    (["--stages", "4", "--microbatches", "16", "--F", "1e308"], "times of 9,007,199,254,740,992 ms or more"),
    (["--stages", "2", "--microbatches", "3", "--comm", "1e308"], "times of 9,007,199,254,740,992 ms or more"),
    (["--stages", "3", "--microbatches", "8", "--B", "1e308"], "times of 9,007,199,254,740,992 ms or more"),
    (["--stages", "2", "--microbatches", "2", "--activation", "1e308"], "memory amounts of 9,007,199,254,740,992 or"),
    (["--stages", "4", "--microbatches", "16", "--F", "1e15"], "the times add up to more than the time grid holds"),
    (["--stages", "4", "--microbatches", "16", "--activation", "1e15"], "the activations add up to more than"),
    (["--stages", "2", "--microbatches", "2", "--F", "1e-9"], "F = 1e-09 ms is below the time grid's resolution"),
    (["--stages", "4", "--microbatches", "8", "--fb-overlap", "0"], "--fb-overlap must be > 0"),
    (["--stages", "4096", "--microbatches", "1000000"], "make 12,288,000,000 ops; zbsolve handles at most"),
    (["--stages", "100000000000", "--microbatches", "2"], "make 600,000,000,000 ops"),  # was a MemoryError
    (["--stages", "4", "--microbatches", "8", "--placement", "interleaved:100000000000"], "9,600,000,000,000 ops"),
    (["--stages", "4", "--microbatches", "8", "--placement", "interleaved:" + "9" * 5000], "placement must be"),
    (["--stages", "4", "--microbatches", "8", "--B", "nan"], "--B must be a finite number"),
    (["--stages", "4", "--microbatches", "8", "--activation", "1", "--residual", "2"], "residual"),
    (["--stages", "4", "--microbatches", "8", "--memory", "banana"], "memory"),
    # values that start with a dash reach their own check (argparse took them for options)
    (["--stages", "4", "--microbatches", "8", "--memory", "-1x"], "memory must be none, Nx"),
    (["--stages", "4", "--microbatches", "8", "--memory", "-1,2,3,4"], "memory amounts must be positive"),
    (["--stages", "4", "--microbatches", "8", "--F", "-1e-3"], "--F must be > 0, got -0.001"),
    (["--stages", "4", "--microbatches", "8", "--placement", "diagonal"], "placement"),
    (["--stages", "4", "--microbatches", "8", "--placement", "interleaved:0"], "interleaved"),
    (["--stages", "4", "--microbatches", "7", "--placement", "bidirectional"], "even"),
    (["--stages", "4", "--microbatches", "8", "--profile", "/nonexistent.json"], "no such file"),
    (["--stages", "four", "--microbatches", "8"], "invalid int value"),
]


@pytest.mark.parametrize("command", ["solve", "compare"])
@pytest.mark.parametrize("seed", ["99999999999", "-1"])
def test_a_seed_outside_32_bits_is_refused(capsys, tmp_path, command, seed):
    # CP-SAT's seed is 32 bits: a larger one ended in a TypeError traceback from OR-Tools
    # (on a problem whose starting schedule leaves something to search for)
    code, out, err = run(capsys, command, "--stages", "4", "--microbatches", "8", "--placement", "vshape",
                         "--memory", "0.5x", "--profile", PROFILE, "--time-limit", "1", "--seed", seed)
    assert code == 2 and out == "" and "seed must be an integer from 0 to 2147483647" in err


def test_deterministic_with_several_workers_is_refused(capsys, tmp_path):
    target = tmp_path / "x.json"
    code, out, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--workers", "2",
                         "--deterministic", "-o", str(target))
    assert code == 2 and out == "" and "deterministic solve needs one worker" in err
    assert not target.exists()


@pytest.mark.parametrize("args, message", BAD)
def test_bad_problem_input_is_one_line_exit_2_and_no_file(capsys, tmp_path, args, message):
    target = tmp_path / "x.json"
    code, _, err = run(capsys, "baseline", "1f1b", *args, "-o", str(target))
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not target.exists()


def test_bad_profile_names_the_key(capsys, tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"name": "p", "source": "test", "costs": {"F": 1, "B": 1, "W": 1}, "comms": 2}))
    code, _, err = run(capsys, "compare", "--stages", "2", "--microbatches", "2", "--profile", str(profile))
    assert code == 2 and "unknown key 'comms'" in err


@pytest.mark.parametrize("args, message", [
    (["--stages", "4096", "--microbatches", "1000000"], "12,288,000,000 ops; zbsolve handles at most"),
    (["--stages", "16", "--microbatches", "128", "--solver", "cbc"], "use --solver cpsat"),
    (["--stages", "4", "--microbatches", "8", "--solver", "nosuch"], "unknown solver 'nosuch'"),
])
def test_solve_refuses_sizes_and_solvers_at_once(capsys, tmp_path, args, message):
    target = tmp_path / "x.json"
    code, _, err = run(capsys, "solve", *args, "-o", str(target))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not target.exists()


def test_unwritable_output_is_refused_before_any_work(capsys):
    code, _, err = run(capsys, "solve", "--stages", "2", "--microbatches", "2", "-o", "/nonexistent/dir/x.json")
    assert code == 2 and "/nonexistent/dir" in err


def test_an_output_that_would_replace_an_input_or_another_output_is_refused(capsys, tmp_path):
    schedule, profile = tmp_path / "s.json", tmp_path / "profile.json"
    assert run(capsys, "baseline", "1f1b", "--stages", "2", "--microbatches", "4", "-o", str(schedule))[0] == 0
    kept = schedule.read_bytes()
    profile.write_text(json.dumps({"name": "p", "source": "test", "costs": {"F": 1, "B": 1, "W": 1}}))
    (tmp_path / "link.json").symlink_to(schedule)
    for args, message in [
        (["export", str(schedule), "--format", "torch-csv", "-o", str(schedule)], "-o .* schedule file"),
        (["export", str(schedule), "--format", "chrome-trace", "-o", str(tmp_path / ".." / tmp_path.name / "s.json")],
         "-o .* schedule file"),
        (["export", str(schedule), "--format", "chrome-trace", "-o", str(tmp_path / "link.json")], "schedule file"),
        (["solve", "-p", "2", "-m", "4", "--profile", str(profile), "-o", str(profile)], "-o .* --profile"),
        (["baseline", "1f1b", "-p", "2", "-m", "4", "-o", str(tmp_path / "x"), "--torch-csv", str(tmp_path / "x")],
         "--torch-csv .* -o .* output"),
    ]:
        code, _, err = run(capsys, *args)
        assert code == 2 and re.search(message, err), (args, err)
    assert schedule.read_bytes() == kept and not (tmp_path / "x").exists()
    assert json.loads(profile.read_text())["name"] == "p"


@pytest.mark.parametrize("args, line", [
    (["solve", "-p", "2", "-m", "2", "--bogus"], "zbsolve solve: error: unrecognized arguments: --bogus"),
    (["validate", "a.json", "b.json"], "zbsolve validate: error: unrecognized arguments: b.json"),
    (["--bogus"], "zbsolve: error: unrecognized arguments: --bogus"),
    # no abbreviations: `--f` (for --F) passed as --fb-overlap
    (["solve", "-p", "2", "-m", "2", "--f", "1"], "zbsolve solve: error: unrecognized arguments: --f 1"),
    (["solve", "-p", "2", "-m", "2", "--time", "1"], "zbsolve solve: error: unrecognized arguments: --time 1"),
    (["bogus"], "zbsolve: error: argument COMMAND: invalid choice: 'bogus'"),
])
def test_a_usage_error_names_the_command(capsys, args, line):
    with pytest.raises(SystemExit) as stop:
        main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(line) and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("unit", ["", " ", "ms\nX", "x" * 33])
def test_a_time_unit_that_would_break_the_tables_is_refused(capsys, unit):
    code, out, err = run(capsys, "baseline", "1f1b", "-p", "2", "-m", "2", "--time-unit", unit)
    assert code == 2 and "time_unit must be a short printable name" in err and not out


def test_infeasible_memory_names_the_minimum(capsys, tmp_path):
    target = tmp_path / "x.json"
    code, _, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--memory", "0.1x", "-o", str(target))
    assert code == 1 and "smallest limit that works is 1 (0.25x U)" in err
    assert not target.exists()


@pytest.mark.parametrize("content", ["", '{"format": "zbsolve-schedule", "version": 7}', "{\"format\": "])
def test_validate_refuses_broken_files(capsys, tmp_path, content):
    path = tmp_path / "broken.json"
    path.write_text(content)
    code, _, err = run(capsys, "validate", str(path))
    assert code == 1 and len(err.strip().splitlines()) == 1


def test_console_script_runs_in_a_fresh_process():
    result = subprocess.run([sys.executable, "-m", "zbsolve", "baseline", "1f1b", "--stages", "4",
                             "--microbatches", "8"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "27.27%" in result.stdout  # 3/11
    result = subprocess.run([sys.executable, "-m", "zbsolve", "validate", "/nonexistent.json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no such file" in result.stderr and "Traceback" not in result.stderr


def test_version_names_zbsolve_and_its_solvers(capsys):
    from importlib.metadata import version

    import zbsolve

    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == (f"zbsolve {zbsolve.__version__} (ortools {version('ortools')}, pulp {version('pulp')})")
    assert zbsolve.__version__ == version("zbsolve")  # the package's and the installed metadata's agree


@pytest.mark.parametrize("args, expected", [
    (["solve", "-p", "4", "-m", "8", "--memory", "1x", "--time-limit", "2"],
     ["gpipe", "1f1b", "zb-h1", "zb-h2", "zb-auto"]),
    (["compare", "-p", "4", "-m", "8", "--placement", "vshape", "--time-limit", "2"],
     ["zb-v", "zb-v-auto", "v-min", "v-half", "dualpipev", "1f1b"]),
    (["compare", "-p", "4", "-m", "8", "--no-solve"], ["gpipe", "1f1b", "zb-h1", "zb-h2", "zb-auto"]),
    (["baseline", "1f1b", "-p", "4", "-m", "8"], ["1f1b"]),
    (["baseline", "zb-h1", "-p", "4", "-m", "8"], ["zb-h1", "1f1b"]),
])
def test_each_hand_made_schedule_is_timed_once(capsys, monkeypatch, args, expected):
    # the solve's start and the table each timed them (at 180,000 ops: 24.6 s, now 14.1 s)
    import zbsolve.baselines

    timed = []

    def counted(graph, orders, name):
        timed.append(name)
        return simulate(graph, orders, name)

    simulate = zbsolve.baselines.simulate
    monkeypatch.setattr(zbsolve.baselines, "simulate", counted)
    assert run(capsys, *args)[0] == 0
    assert timed == expected


@pytest.mark.parametrize("args, message", [
    (["solve", "-p", "4", "-m", "8", "--placement", "bidirectional", "--fb-overlap", "1.5", "--solver", "cbc"],
     "cbc backend does not model F&B overlap"),
    (["compare", "-p", "4", "-m", "8", "--memory", "0.1x"], "smallest limit that works"),
])
def test_what_the_solve_refuses_is_refused_before_the_hand_made_schedules_are_timed(capsys, monkeypatch, args,
                                                                                   message):
    import zbsolve.baselines

    def refused(*_):
        raise AssertionError("a hand-made schedule was timed")

    monkeypatch.setattr(zbsolve.baselines, "simulate", refused)
    code, out, err = run(capsys, *args)
    assert code in (1, 2) and message in err and out == ""


def test_the_api_example_runs_and_writes_only_where_it_is_told(tmp_path):
    cwd, out = tmp_path / "cwd", tmp_path / "out"
    cwd.mkdir()
    out.mkdir()
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "solve_api.py"), "--time-limit", "5",
                             "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert "solved (optimal, gap 0.00%): makespan 640.365 ms" in result.stdout
    assert f"wrote {out / 'solved.json'} and {out / 'solved.csv'}" in result.stdout
    validate(read_schedule(out / "solved.json"))
    assert len((out / "solved.csv").read_text().splitlines()) == 4
    assert list(cwd.iterdir()) == []  # nothing in the folder it was started from


def test_the_files_are_written_when_the_reader_of_the_output_leaves(tmp_path):
    # `zbsolve solve -o s.json | head -1`: the table met a closed pipe, and the command ended
    # with exit code 0 before writing any file
    schedule, csv = tmp_path / "s.json", tmp_path / "s.csv"
    process = subprocess.Popen([sys.executable, "-m", "zbsolve", "solve", "--stages", "2", "--microbatches", "4",
                                "-o", str(schedule), "--torch-csv", str(csv)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # before the interpreter has even started: every line meets a closed pipe
    error = process.stderr.read()
    assert process.wait(timeout=120) == 0 and "Error" not in error and "Exception" not in error, error
    validate(read_schedule(schedule))
    assert csv.read_text().count("\n") == 2


def test_the_files_are_written_without_standard_output_or_error(tmp_path):
    # `zbsolve solve -o s.json >&- 2>&-`: Python's sys.stdout is None there, and the first
    # print ended the command (exit 1) before any file was written
    import os

    schedule = tmp_path / "s.json"
    result = subprocess.run([sys.executable, "-m", "zbsolve", "solve", "--stages", "2", "--microbatches", "4",
                             "-o", str(schedule)], preexec_fn=lambda: (os.close(1), os.close(2)), timeout=120)
    assert result.returncode == 0
    validate(read_schedule(schedule))


@pytest.mark.parametrize("extra, warning", [
    (["--fb-overlap", "1.5"], "has no effect: no device holds two stages"),
    (["--placement", "bidirectional", "--fb-overlap", "1.5"], "shorter than the longer half of a pair that may form "
                                                              "(max(F, B + W) = 2)"),
    (["--placement", "bidirectional", "--fb-overlap", "3.5"], "(F + B + W = 3 at most): overlapping cannot save"),
    (["--placement", "bidirectional", "--fb-overlap", "2.4"], None),
])
def test_an_fb_overlap_outside_the_design_range_is_warned_about_and_still_used(capsys, extra, warning):
    code, out, err = run(capsys, "compare", "--stages", "4", "--microbatches", "8", "--no-solve", "-q", *extra)
    assert code == 0 and "F&B overlap" in out
    if warning is None:
        assert "warning" not in err
    else:
        assert f"zbsolve compare: warning: --fb-overlap {extra[-1]} " in err and warning in err
        assert err.count("warning") == 1


def test_a_schedule_file_with_such_an_fb_overlap_is_warned_about_in_the_file_s_words(capsys, tmp_path):
    path = tmp_path / "pairs.json"
    code, _, _ = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--placement", "bidirectional",
                     "--fb-overlap", "1.5", "--time-limit", "5", "--workers", "2", "-q", "-o", str(path))
    assert code == 0
    code, out, err = run(capsys, "validate", str(path))
    assert code == 0 and "valid" in out
    assert err == ("zbsolve validate: warning: fb_overlap 1.5 is shorter than the longer half of a pair that may "
                   "form (max(F, B + W) = 2): such a pair runs faster than its parts alone could, so times that "
                   "use it are optimistic\n")


@pytest.mark.parametrize("extra, warned", [
    (["--workers", "1"], True),
    (["--workers", "1", "--no-deterministic"], False),
    (["--workers", "2"], False),
])
def test_a_deterministic_solve_with_pairs_says_it_may_overrun_its_limit(capsys, extra, warned):
    code, _, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--placement", "bidirectional",
                       "--fb-overlap", "2.4", "--time-limit", "5", "-q", *extra)
    assert code == 0
    assert ("may take several times --time-limit and still not repeat exactly" in err) == warned


def test_progress_written_to_a_log_shows_each_change_once(capsys):
    from zbsolve.cli.solve import ProgressLine

    line = ProgressLine("cpsat", "ms", enabled=True)  # capsys's stderr is not a terminal
    line(1504.38, 1369.8, 0.4)
    line(1504.38, 1369.8, 3.8)  # the next phase reports its hint, the same schedule
    line(1510.0, None, 4.3)  # a restricted phase's worse schedule
    line(1499.54, None, 8.7)
    line(None, 1372.0, 9.0)  # a bound within 2 s of the last line waits for the next one
    line(None, 1372.0, 12.0)
    line(None, 1372.0, 15.0)
    assert capsys.readouterr().err.splitlines() == [
        "cpsat     0.4s  best 1504.38 ms  bound 1369.8  gap 8.95%",
        "cpsat     8.7s  best 1499.54 ms  bound 1369.8  gap 8.65%",
        "cpsat    12.0s  best 1499.54 ms  bound 1372  gap 8.51%",
    ]


def test_a_log_gets_a_progress_line_at_least_every_heartbeat(capsys):
    from zbsolve.cli.solve import HEARTBEAT_S, ProgressLine

    line = ProgressLine("cpsat", "ms", enabled=True)
    line(1504.38, 1369.8, 0.4)
    line(1504.38, 1369.8, 0.4 + HEARTBEAT_S - 0.1)  # unchanged, and too soon
    line(1504.38, 1369.8, 0.4 + HEARTBEAT_S)  # unchanged, but the log has been silent long enough
    assert [row.split("s ")[0].split()[-1] for row in capsys.readouterr().err.splitlines()] == ["0.4", "5.4"]


def test_a_silent_phase_still_writes_lines_to_a_log(capsys):
    import time

    from zbsolve.cli.solve import ProgressLine

    deadline = time.monotonic() + 30  # one report, then the heartbeat alone writes; no verdict on speed
    rows: list[str] = []
    line = ProgressLine("cpsat", "ms", enabled=True)
    line.start(every=0.01, heartbeat=0.05)
    line(1504.38, 1369.8, 0.4)
    while len(rows) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
        rows += capsys.readouterr().err.splitlines()
    line.close()
    assert len(rows) >= 3 and all(r.endswith("best 1504.38 ms  bound 1369.8  gap 8.95%") for r in rows)
    clock = [float(r.split()[1].rstrip("s")) for r in rows]
    assert clock == sorted(clock) and clock[0] == 0.4 and clock[-1] > 0.4


def test_on_a_terminal_the_progress_clock_moves_between_reports(capsys):
    import re
    import time

    from zbsolve.cli.solve import ProgressLine

    line = ProgressLine("cpsat", "ms", enabled=True)
    line.tty = True  # as on a terminal: one line redrawn in place
    line.start(every=0.05)
    time.sleep(0.2)
    assert capsys.readouterr().err == ""  # nothing to show before the first report
    line(1504.38, 1369.8, 0.4)
    time.sleep(0.5)  # a silent phase
    line.close()
    err = capsys.readouterr().err
    assert err.endswith("\n")
    draws = [d for d in err.rstrip("\n").split("\r") if d]
    assert len(draws) >= 3  # the report, then the clock's redraws
    assert all(d.endswith("best 1504.38 ms  bound 1369.8  gap 8.95%\033[K") for d in draws)
    clock = [float(re.match(r"cpsat +([0-9.]+)s", d).group(1)) for d in draws]
    assert clock[0] == 0.4 and clock == sorted(clock) and clock[-1] >= 0.6  # counted on from 0.4 s
    time.sleep(0.2)
    assert capsys.readouterr().err == ""  # closed: the clock has stopped


def test_the_closing_line_says_when_no_search_ran(capsys):
    # ZB-H1 meets the bound at 1x: no backend runs, and the line must not credit one.
    code, _, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--memory", "1x")
    assert code == 0
    assert "answered in" in err and "without a search: the starting schedule meets the lower bound" in err
    assert "solved in" not in err
    code, _, err = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--memory", "0.75x",
                       "--time-limit", "2", "--workers", "1")
    assert code == 0 and "solved in" in err and "with cpsat, 1 worker(s), seed 0, deterministic" in err


def test_a_profile_measured_for_other_ranks_is_said_to_be_reused_as_it_is(capsys):
    code, _, err = run(capsys, "compare", "--profile", PROFILE, "--stages", "4", "--microbatches", "8", "--no-solve")
    assert code == 0
    assert "note: the profile's costs are per rank-stage of a 8-rank split; with --stages 4" in err
    code, _, err = run(capsys, "compare", "--profile", PROFILE, "--no-solve")
    assert code == 0 and "rank-stage of a" not in err


def test_a_solve_with_the_recompute_lever_shows_the_recomputed_baselines(capsys, tmp_path):
    target = tmp_path / "r.json"
    code, out, _ = run(capsys, "solve", "--stages", "4", "--microbatches", "6", "--memory", "0.34x",
                       "--levers", "recompute", "--checkpoint", "0.1", "--time-limit", "1", "--workers", "1",
                       "-q", "-o", str(target))
    assert code == 0, out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "1f1b-r" in rows and "zb-h1-r" in rows and "recompute" in out
    code, out, _ = run(capsys, "validate", str(target))
    assert code == 0


@pytest.mark.parametrize("args, message", [
    (("--levers", "swap"), "--levers: unknown lever 'swap'; choose from recompute, offload"),
    (("--levers", "offload"), "the offload lever needs each stage's copy time"),
    (("--levers", "offload", "--host-bandwidth", "25GB"), "--host-bandwidth: bandwidth '25GB': expected an amount"),
    (("--levers", "offload", "--host-bandwidth", "25GB/s"), "--host-bandwidth: a copy's time from a bandwidth needs "
                                                            "the activation in a byte unit"),
    (("--levers", "offload", "--offload", "0"), "--offload must be > 0"),
    (("--levers", "recompute,offload", "--offload", "1", "--solver", "cbc"), "cbc backend models one memory lever"),
    (("--recompute", "0"), "--recompute must be > 0"),
    (("--checkpoint", "2"), "checkpoint must be <= activation"),
])
def test_lever_options_refuse_bad_input_by_name(capsys, args, message):
    code, out, err = run(capsys, "solve", "--stages", "2", "--microbatches", "2", "--time-limit", "1", *args)
    assert code == 2 and message in err


def test_a_solve_with_the_offload_lever_times_copies_from_the_bandwidth_and_counts_them(capsys, tmp_path):
    # 0.5 GB per rank-stage over 25 GB/s: 20 ms a copy, each way
    target = tmp_path / "o.json"
    code, out, _ = run(capsys, "solve", "--stages", "4", "--microbatches", "8", "--F", "40", "--B", "40", "--W", "40",
                       "--activation", "0.5", "--memory-unit", "GB", "--memory", "1GB", "--levers", "offload",
                       "--host-bandwidth", "25GB/s", "--time-limit", "2", "--workers", "1", "-q", "-o", str(target))
    assert code == 0, out
    assert "levers offload (copy 20 ms each way per stage)" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "1f1b-o" in rows and "offloads" in rows["1f1b-o"] and "offloads" in rows["solved"]


def test_a_plan_that_offloads_runs_and_says_how(capsys, tmp_path):
    # two ranks (a launch of four spends most of its time importing torch): 4 of 8 offloaded
    target = tmp_path / "o.json"
    code, out, _ = run(capsys, "solve", "--stages", "2", "--microbatches", "4", "--F", "10", "--B", "10", "--W", "8",
                       "--activation", "1", "--memory-unit", "MB", "--memory", "0.5x", "--levers", "offload",
                       "--offload", "2", "--time-limit", "2", "--workers", "1", "-q", "-o", str(target))
    assert code == 0, out
    plan = read_schedule(target)
    assert plan.offloaded() > 0
    code, out, err = run(capsys, "run", str(target), "--layers", "1", "--hidden", "8", "--heads", "2", "--seq", "4",
                         "--microbatch-size", "1", "--steps", "1", "--warmup", "0")
    assert code == 0, err
    assert f"the plan offloads {plan.offloaded()} microbatch-stages" in err
    assert "on CPU the ranks' own: the copies run and free nothing" in err
