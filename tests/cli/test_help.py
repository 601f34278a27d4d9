"""Every command's --help prints: a user's first command must not end in a traceback."""

import pytest

from zbsolve.cli import build_parser, main

COMMANDS = sorted(build_parser().commands)


def test_the_command_list_is_the_documented_one():
    assert set(COMMANDS) >= {"solve", "baseline", "compare", "validate", "plot", "export", "profile", "sweep",
                             "frontier", "run"}


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_prints_and_exits_0(capsys, command):
    argv = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as exit:
        main(argv)
    out, err = capsys.readouterr()
    assert exit.value.code == 0, err
    assert out.startswith("usage: zbsolve"), out[:200]
    assert err == ""
    if command is not None:
        assert f"zbsolve {command}" in out.splitlines()[0]
