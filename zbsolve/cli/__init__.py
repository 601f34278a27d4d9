"""`zbsolve` command line. Exit codes: 0 success; 1 the schedule or problem is invalid or
infeasible, or no schedule was found; 2 usage error (bad option, value or input file);
130 interrupted."""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping

from zbsolve.errors import ProblemWarning, ZbsolveError

from . import commands

EXIT_CODES = """exit codes:
  0    success
  1    the schedule (a malformed schedule file too) or problem is invalid or
       infeasible, or no schedule was found
  2    usage error: a bad option or value, a missing input file, a malformed
       profile, an output path that cannot be written or that names an input
       or another output, an export format the problem has no form in
  130  interrupted (Ctrl-C or SIGTERM)"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (no usage dump)."""

    commands: Mapping[str, argparse.ArgumentParser]  # the top level's subcommands, by name

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)


def build_parser() -> _Parser:
    parser = _Parser(
        prog="zbsolve",
        description="Find the best pipeline-parallel schedule for your costs, prove how good it "
        "is, and compare it with 1F1B and the hand-made schedules.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action=_PrintVersions, nargs=0,
                        help="print the versions of zbsolve and its solvers and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.register(sub, EXIT_CODES)
    parser.commands = sub.choices
    return parser


class _PrintVersions(argparse.Action):
    """argparse's own version action wants the text up front; looking the versions up
    (about 20 ms) is left to the one command line that asks for them."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sys.stdout.write(_versions() + "\n")
        parser.exit()


def _versions() -> str:
    """zbsolve's version and those of the solvers it runs: a solve's result depends on them."""
    from importlib.metadata import PackageNotFoundError, version

    from zbsolve.version import __version__

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"zbsolve {__version__} (ortools {installed('ortools')}, pulp {installed('pulp')})"


class _OutlivesItsReader:
    """A standard stream that survives its reader leaving (`zbsolve solve -o s.json | head`)
    or never having been there (`>&-`: Python's stream is None): what is written is dropped,
    and the command goes on to write its files. Raising there lost a finished solve's
    schedule file."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text) if self._stream is not None else len(text)
        except BrokenPipeError:
            self._drop_the_rest()
            return len(text)

    def flush(self) -> None:
        try:
            if self._stream is not None:
                self._stream.flush()
        except BrokenPipeError:
            self._drop_the_rest()

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def _drop_the_rest(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # the interpreter's last flush goes there too
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a file descriptor (a test's capture)
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _OutlivesItsReader(sys.stdout), _OutlivesItsReader(sys.stderr)
    try:
        parser = build_parser()
        args, unknown = parser.parse_known_args(_joined_negative_values(sys.argv[1:] if argv is None else argv))
        if unknown:  # parse_args would report them as the top level's, not the command's
            parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        return _run(args)
    finally:
        sys.stdout, sys.stderr = streams


_NUMBER_LIKE = re.compile(r"-[0-9.]")


def _joined_negative_values(argv: list[str]) -> list[str]:
    """`--memory -1x` as `--memory=-1x`: argparse reads a value that starts with a dash and is
    not a plain number (-1x, -1e3, -1,2) as an unknown option and reports the option's value
    missing, where the value's own check says what is wrong with it."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":  # what follows is positional, as the user wrote it
            return joined + argv[i:]
        if (token.startswith("--") and "=" not in token and i + 1 < len(argv)
                and _NUMBER_LIKE.match(argv[i + 1])):
            joined.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        joined.append(token)
        i += 1
    return joined


def _run(args: argparse.Namespace) -> int:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("once", ProblemWarning)  # each different message once, wherever raised
            warnings.showwarning = _say_warnings_as(args.command, warnings.showwarning)
            return args.run(args)
    except ZbsolveError as error:
        sys.stderr.write(f"zbsolve {args.command}: error: {error}\n")
        return error.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"zbsolve {args.command}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


def _say_warnings_as(command: str, show: Callable[..., None]) -> Callable[..., None]:
    """A `warnings.showwarning` that prints zbsolve's own warnings as the CLI's warning lines."""

    def said(message: Warning | str, category: type[Warning], *where: object) -> None:
        if issubclass(category, ProblemWarning):
            sys.stderr.write(f"zbsolve {command}: warning: {message}\n")
        else:
            show(message, category, *where)

    return said
