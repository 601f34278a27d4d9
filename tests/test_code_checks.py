"""The code's own habits, held by the suite so that the README's test command (what CI runs)
checks them: ruff's rules and mypy's types (both configured in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing():
    done = _run("ruff", "check", "zbsolve", "tests", "benchmarks", "examples")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing_in_the_package():
    done = _run("mypy")  # its files and settings: pyproject.toml
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues found" in done.stdout
