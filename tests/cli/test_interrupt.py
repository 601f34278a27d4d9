"""Ctrl-C and SIGTERM during a real solve in a separate process: a valid file or none."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import REPO_ROOT, children

from zbsolve.formats.schedule_json import read_schedule
from zbsolve.schedule.validator import validate

ROOT = REPO_ROOT
PROFILE = str(ROOT / "models" / "zb-1.5b.json")


def start_long_solve(target: Path, solver: str = "cpsat") -> subprocess.Popen:
    """A two-minute solve that cannot finish early (span at 1.5x on the 1.5B profile).

    Its temporary files go to a folder beside `target` (`scratch`), so a test can see what is left there.
    """
    scratch = target.parent / "scratch"
    scratch.mkdir()
    return subprocess.Popen(
        [sys.executable, "-m", "zbsolve", "solve", "--profile", PROFILE, "--memory", "1.5x",
         "--objective", "span", "--time-limit", "120", "--workers", "1", "--no-deterministic", "--solver", solver,
         "-o", str(target)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch), "TMP": str(scratch)},
    )


# A stop long before the solve's 120 s limit: how long it takes depends on the machine's load.
WITHIN_S = 60


class Watched:
    """A long solve whose output is read as it comes, so that a test can wait for its search."""

    def __init__(self, target: Path, solver: str = "cpsat") -> None:
        self.process = start_long_solve(target, solver)
        self.err: list[str] = []
        self.out: list[str] = []
        self.reported = threading.Event()  # the first progress line: the search starts from there
        self.readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                        for stream, lines in ((self.process.stderr, self.err), (self.process.stdout, self.out))]
        for reader in self.readers:
            reader.start()

    def _read(self, stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)
            if " best " in line:
                self.reported.set()

    def searching(self, solver: str) -> None:
        """Back once the search runs: after the first progress line, and for CBC once its
        process does."""
        assert self.reported.wait(60), "".join(self.err)
        deadline = time.monotonic() + 60
        while solver == "cbc" and not any("cbc" in line for _, line in children(self.process.pid)):
            assert time.monotonic() < deadline, "no CBC process"
            time.sleep(0.05)
        time.sleep(1.0)  # well into the search

    def finish(self, timeout: float) -> tuple[str, str]:
        self.process.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=10)
        return "".join(self.out), "".join(self.err)


@pytest.mark.parametrize("solver, signum", [
    ("cpsat", signal.SIGINT),  # SIGTERM takes the same path: see the twice-delivered test below
    # CBC is reached through /proc (Linux) and notices between search nodes
    pytest.param("cbc", signal.SIGINT, marks=pytest.mark.skipif(
        not Path("/proc/self/stat").exists(), reason="needs /proc to reach the CBC process")),
])
def test_signal_during_a_solve_stops_and_writes_a_valid_interrupted_file(tmp_path, solver, signum):
    target = tmp_path / "solved.json"
    solve = Watched(target, solver)
    solve.searching(solver)
    solve.process.send_signal(signum)
    sent = time.monotonic()
    out, err = solve.finish(timeout=90)
    stopped_after = time.monotonic() - sent
    assert solve.process.returncode == 130, err
    assert stopped_after < WITHIN_S, f"took {stopped_after:.1f} s to stop"
    assert "Traceback" not in err and "stopping the solver" in err
    schedule = read_schedule(target)
    validate(schedule)
    assert schedule.solver.status == "interrupted"
    assert "interrupted" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch", "solved.json"]
    assert list((tmp_path / "scratch").iterdir()) == [], "no temporary file left behind"


@pytest.mark.parametrize("delay", [1.5, 3.0])
def test_interrupt_early_leaves_a_valid_file_or_none(tmp_path, delay):
    """While baselines run or the model is built: still no traceback, no partial file."""
    target = tmp_path / "solved.json"
    process = start_long_solve(target)
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    if target.exists():
        schedule = read_schedule(target)
        validate(schedule)
        assert schedule.solver.status == "interrupted"
    assert sorted(p.name for p in tmp_path.iterdir()) in (["scratch"], ["scratch", "solved.json"])
    assert list((tmp_path / "scratch").iterdir()) == []


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to reach the CBC process")
def test_a_cbc_run_left_behind_is_killed_when_the_program_ends(tmp_path):
    # A search that overruns its limit is left behind, and the daemon thread that would kill
    # its CBC ends with the program: CBC ran on alone after `zbsolve solve` had returned.
    # Two stand-ins named cbc: the one reading from a run's folder still going is killed at
    # exit, the other (not zbsolve's) is left alone.
    fake = tmp_path / "cbc"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    fake.chmod(0o755)
    ours, other = str(tmp_path / "zbsolve-cbc-ours"), str(tmp_path / "zbsolve-cbc-other")
    script = (
        "import subprocess\n"
        "from zbsolve.solvers.cbc import model\n"
        "quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"ours = subprocess.Popen([{str(fake)!r}, {ours!r} + '/model.mps'], **quiet)\n"
        f"other = subprocess.Popen([{str(fake)!r}, {other!r} + '/model.mps'], **quiet)\n"
        f"model._RUNNING.add({ours!r})\n"
        "print(ours.pid, other.pid)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=30)
    ours_pid, other_pid = map(int, done.stdout.split())
    try:
        deadline = time.monotonic() + 5
        while _running(ours_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(ours_pid), "the left-behind CBC still runs"
        assert _running(other_pid)
    finally:
        for pid in (ours_pid, other_pid):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("solver, signum, again", [  # SIGTERM twice: the CBC case below
    ("cpsat", signal.SIGINT, signal.SIGINT), ("cpsat", signal.SIGTERM, signal.SIGINT),
    pytest.param("cbc", signal.SIGTERM, signal.SIGTERM, marks=pytest.mark.skipif(
        not Path("/proc/self/stat").exists(), reason="needs /proc to reach the CBC process")),
])
def test_one_interruption_delivered_twice_still_keeps_the_best_schedule(tmp_path, solver, signum, again):
    """`timeout` signals the process and then its group; a terminal's Ctrl-C reaches the whole
    group too. The second delivery, moments after the first, is the same request."""
    target = tmp_path / "solved.json"
    solve = Watched(target, solver)
    assert solve.reported.wait(60)  # a starting schedule: in the start or the search, the best so far is kept
    solve.process.send_signal(signum)
    time.sleep(0.05)
    solve.process.send_signal(again)
    out, err = solve.finish(timeout=90)
    assert solve.process.returncode == 130, err
    assert "Traceback" not in err
    schedule = read_schedule(target)
    validate(schedule)
    assert schedule.solver.status == "interrupted"
