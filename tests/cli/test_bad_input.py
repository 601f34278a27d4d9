"""Bad input on the command line: one line on stderr, a non-zero exit, no traceback, and no
file written or replaced."""

import os
import stat

import pytest
from helpers import REPO_ROOT

from zbsolve.cli import main

SMALL = ["--stages", "2", "--microbatches", "2", "-q"]


def run(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, said):
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("zbsolve ") and said in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args, said", [
    (["solve", *SMALL, "--memory", ""], "memory is empty"),
    (["compare", *SMALL, "--memory", "", "--no-solve"], "memory is empty"),
    (["solve", *SMALL, "-o", ""], "an output file name is empty"),
    (["solve", *SMALL, "--torch-csv", ""], "an output file name is empty"),
    (["solve", *SMALL, "--plot", ""], "an output file name is empty"),
    (["baseline", "1f1b", *SMALL[:-1], "-o", ""], "an output file name is empty"),
])
def test_empty_values_are_refused_not_taken_as_none(capsys, tmp_path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    one_line_error(*run(capsys, *args)[::2], said)
    assert list(tmp_path.iterdir()) == []


def test_special_files_given_to_o_are_refused_before_solving_and_left_alone(capsys, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, kind in ((fifo, "FIFO"), ("/dev/null", "device"), (tmp_path, "directory")):
        before = os.lstat(target).st_mode
        code, out, err = run(capsys, "solve", *SMALL, "-o", str(target))
        one_line_error(code, err, f"it is a {kind}")
        assert out == ""  # refused before the solve printed its table
        assert os.lstat(target).st_mode == before
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_o_through_a_symbolic_link_writes_the_file_it_points_to(capsys, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    (tmp_path / "link.json").symlink_to("real.json")
    code, _, err = run(capsys, "solve", *SMALL, "-o", str(tmp_path / "link.json"))
    assert code == 0, err
    assert os.path.islink(tmp_path / "link.json")
    code, out, _ = run(capsys, "validate", str(real))
    assert code == 0 and "valid solved schedule" in out


@pytest.mark.parametrize("command", ["validate", "plot"])
def test_a_deeply_nested_schedule_file_gets_one_line(capsys, tmp_path, command):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    extra = ["-o", str(tmp_path / "p.png")] if command == "plot" else []
    code, _, err = run(capsys, command, str(deep), *extra)
    assert code == 1 and err.count("\n") == 1 and "nested too deeply" in err
    assert not (tmp_path / "p.png").exists()


def test_a_deeply_nested_profile_gets_one_line(capsys, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    code, _, err = run(capsys, "solve", "--profile", str(deep), *SMALL)
    one_line_error(code, err, "nested too deeply")


def test_the_pair_determinism_note_is_left_out_where_no_pair_can_form(capsys):
    # On the single placement a device holds one stage: no pair can form, which the warning
    # says; a note about how pairs slow a deterministic search would only mislead.
    code, _, err = run(capsys, "solve", *SMALL, "--fb-overlap", "1.5", "--workers", "1", "--time-limit", "2")
    assert code == 0
    assert "no pair can form" in err or "can form" in err
    assert "F&B pairs" not in err and "--no-deterministic keeps to the clock" not in err
    code, _, err = run(capsys, "solve", "--stages", "2", "--microbatches", "4", "--placement", "bidirectional",
                       "--fb-overlap", "2.5", "--workers", "1", "--time-limit", "1", "-q")
    assert code == 0 and "--no-deterministic keeps to the clock" in err


assert (REPO_ROOT / "models").is_dir()
