"""A sweep when things die: a killed worker's point is solved again and the sweep ends; a
killed driver's workers end quietly with it; an unreachable Ray cluster is one line."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import alive, children

# Points no solve proves in 2 s (tight memory, P=8): each runs its whole time limit, so a worker is
# mid-solve for seconds after it appears.
SLOW = ["--stages", "8", "--placements", "single", "--microbatches", "24", "--memory", "0.6x,0.7x",
        "--F", "1", "--B", "1.3", "--W", "0.7", "--comm", "0.1", "--time-limit", "2", "--workers", "1",
        "--no-deterministic", "-q"]
MID_SOLVE_S = 1.0  # after the worker appears: its imports, the baselines, then the solve


def worker_of(driver: subprocess.Popen, deadline_s: float = 120) -> int:
    """The sweep's pool process, once it has one (not Python's resource tracker)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for pid, line in children(driver.pid):
            if "spawn_main" in line:
                return pid
        assert driver.poll() is None, "the sweep ended before it started a worker"
        time.sleep(0.05)
    raise AssertionError("no worker process appeared")


def sweep(store: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "zbsolve", "sweep", *SLOW, "--jobs", "1", "--store", str(store),
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def states(store: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT state, count(*) FROM points GROUP BY state").fetchall())


def test_a_killed_worker_s_point_is_solved_again_and_the_sweep_ends(tmp_path):
    driver = sweep(tmp_path / "s.db")
    worker = worker_of(driver)
    time.sleep(MID_SOLVE_S)
    os.kill(worker, signal.SIGKILL)  # as the OOM killer would
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err
    assert "a worker process died while solving P=8 single M=24 memory=0.6x makespan: solving it again, alone" in err
    assert out.startswith("2 points solved now, 0 found done")
    assert states(tmp_path / "s.db") == {"done": 2}
    assert "Traceback" not in err


def test_a_killed_driver_takes_its_workers_with_it_quietly(tmp_path):
    driver = sweep(tmp_path / "s.db")
    worker = worker_of(driver)
    time.sleep(MID_SOLVE_S)
    os.kill(driver.pid, signal.SIGKILL)
    _, err = driver.communicate(timeout=60)  # returns once every process holding its stderr is gone
    deadline = time.monotonic() + 30
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker)
    for noise in ("Traceback", "BrokenPipeError", "leaked semaphore"):
        assert noise not in err, err


def test_an_unreachable_ray_cluster_is_one_line(tmp_path):
    pytest.importorskip("ray")
    done = subprocess.run([sys.executable, "-m", "zbsolve", "sweep", *SLOW, "--store", str(tmp_path / "s.db"),
                           "--ray", "127.0.0.1:1"], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert "cannot reach a Ray cluster at 127.0.0.1:1" in done.stderr


def test_sigterm_to_a_sweep_on_local_ray_stops_it_with_the_stop_lines(tmp_path):
    pytest.importorskip("ray")
    store = tmp_path / "s.db"
    driver = subprocess.Popen([sys.executable, "-m", "zbsolve", "sweep", *SLOW, "--store", str(store),
                               "--ray", "local"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # a point handed to Ray: the sweep is under way
        if store.exists() and states(store).get("running"):
            break
        assert driver.poll() is None, driver.stderr.read()
        time.sleep(0.1)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, err
    assert "zbsolve sweep: stopped with 0 of 2 points in" in err and "the same command finishes the rest" in err
    assert "Traceback" not in err and "Stack (most recent call first)" not in err
    assert states(store) == {"pending": 2}  # handed back
