"""Every command the README and docs/ show runs as written: each page's commands in page order
(later ones read what earlier ones wrote) in a fresh folder, with small time limits and few
steps so that the suite stays short. Synopses (with [options] or A|B) are not commands; the
commands that need torch run where it is installed."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys

import pytest
from helpers import REPO_ROOT

PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md"))]
# The benchmark scripts run for minutes to hours by design (docs/benchmarks.md gives their
# times); the benchmark suite's own tests cover their code paths.
NOT_RUN = ("python benchmarks/",)
NO_GPU = "--device cuda"  # no GPU where the suite runs
TORCH = importlib.util.find_spec("torch") is not None


PLACEHOLDERS = re.compile(r"[\[|<]|\.\.\.|\b(FILE|NAME|STORE|PLAN|MEASURED|OUT|DIR|ADDRESS)\b")
FILE_WORD = re.compile(r"[\w./-]+\.(?:json|csv|png|svg|pdf|db|py)\b")  # a file a command names


def commands(page: str) -> list[str]:
    """The page's commands in order: the lines of code blocks that start with `zbsolve ` or
    `python ` (continuation lines joined, comments cut), and inline code that does and names a
    file (`zbsolve run plan.json ...`; a bare `zbsolve sweep` or `--backward torch` in a
    sentence names a command or an option, not a command line)."""
    text = (REPO_ROOT / page).read_text()
    found = []
    for block, inline in re.findall(r"```[a-z]*\n(.*?)```|`([^`]+)`", text, re.DOTALL):
        lines = block.replace("\\\n", " ").splitlines() if block else [re.sub(r"\s+", " ", inline)]
        for line in lines:
            line = line.split("  #")[0].strip()
            if not line.startswith(("zbsolve ", "python ")) or PLACEHOLDERS.search(line):
                continue
            if block or FILE_WORD.search(line) or line in ("zbsolve profiles", "zbsolve --version"):
                found.append(line)
    return found


QUICK_S = "0.2"  # every solve still runs its phases and writes its files; the search is cut short


def quick(command: str) -> list[str]:
    """The command with a time limit of 0.2 s (solves and sweeps), 2 steps after 1 warm-up
    (runs) and one timed repeat (profiles): what it does stays as written."""
    words = shlex.split(command)
    for option, value in (("--time-limit", QUICK_S), ("--steps", "2"), ("--warmup", "1")):
        if option in words:
            words[words.index(option) + 1] = value
    if words[:2] in (["zbsolve", "solve"], ["zbsolve", "compare"], ["zbsolve", "sweep"]) \
            and "--time-limit" not in words:
        words += ["--time-limit", QUICK_S]
    if words[:2] == ["zbsolve", "profile"] and "--from-run" not in words:
        words += ["--repeats", "1"]
    if words[:2] == ["zbsolve", "run"]:
        words += [w for option, value in (("--steps", "2"), ("--warmup", "1")) if option not in words
                  for w in (option, value)]
    if words[0] == "zbsolve":
        return [sys.executable, "-m", "zbsolve", *words[1:]]
    return [sys.executable, str(REPO_ROOT / words[1]), *words[2:]]


def needs_torch(command: str) -> bool:
    words = command.split()
    return (words[1] in ("run",) or (words[1] == "profile" and "--from-run" not in words)
            or "torch_pipeline" in command)


def test_the_pages_show_the_commands_this_test_runs():
    shown = {page: commands(page) for page in PAGES}
    readme = shown["README.md"]
    assert readme[0] == "zbsolve profiles" and readme[1].startswith("zbsolve profile --device cpu")
    assert "zbsolve plot plan.json -o plan.png" in readme
    assert "zbsolve profile --from-run measured.json -o calibrated.json" in readme
    assert any(c.startswith("zbsolve sweep --profile models/zb-1.5b.json") for c in readme)
    assert sum(len(c) for c in shown.values()) > 10
    readme_chains = chains("README.md")  # what the worked example writes, each command reads
    worked = next(c for c in readme_chains if any("tiny.json" in command for command in c))
    assert [c.split()[1] for c in worked] == ["profile", "solve", "plot", "run", "profile"]


def to_run(page: str) -> list[str]:
    """The page's commands less those not run here, and less those an earlier page shows to the
    letter (run there, in its own chain)."""
    earlier = {c for p in PAGES[:PAGES.index(page)] for c in commands(p)}
    return [c for c in commands(page) if not c.startswith(NOT_RUN) and NO_GPU not in c and c not in earlier]


def chains(page: str) -> list[list[str]]:
    """The page's commands to run, in groups that share no file (each group in page order): a
    group runs on its own, in its own folder."""
    groups: list[tuple[set[str], list[str]]] = []
    for command in to_run(page):
        files = set(FILE_WORD.findall(command))
        joined = [g for g in groups if g[0] & files]
        merged = (files.union(*(g[0] for g in joined)), [c for g in joined for c in g[1]] + [command])
        groups = [g for g in groups if g not in joined] + [merged]
    return [sorted(g[1], key=to_run(page).index) for g in groups]


CHAINS = [(page, k) for page in PAGES for k in range(len(chains(page)))]


@pytest.mark.parametrize("page, chain", CHAINS, ids=[f"{p}-{k}" for p, k in CHAINS])
def test_every_command_a_page_shows_runs(page, chain, tmp_path):
    ran = 0
    for command in chains(page)[chain]:
        if needs_torch(command) and not TORCH:
            continue
        done = subprocess.run(quick(command), cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{page}: {command}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, f"{page}: {command}\n{done.stderr[-2000:]}"
        if "examples/torch_pipeline.py" in command:
            assert "step 1: loss" in done.stdout  # it trained: two steps, each with a loss
        ran += 1
    assert ran > 0
