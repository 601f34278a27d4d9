"""Sweeps end to end, with real processes: the pool and a real local Ray give the same store
for deterministic solves; a sweep stopped part way and run again ends with the store an
uninterrupted one writes; the command prints the frontier and writes its files."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers import REPO_ROOT

from zbsolve.problem.problem import StageCost
from zbsolve.sweep import SolverSettings, Store, cost_model, points, run_sweep, store_settings

COSTS = ["--workers", "1", "--F", "1", "--B", "1.5", "--W", "0.5", "--comm", "0.1"]
GRID = ["--stages", "2,3", "--microbatches", "4", "--placements", "single,vshape", "--memory", "1x,2x",
        "--time-limit", "1", *COSTS]
# Points that take a while (no proof within the limit), so that a stop can come between them.
SLOW = ["--stages", "4", "--microbatches", "8", "--placements", "vshape", "--memory", "0.6x,0.7x,0.8x",
        "--time-limit", "0.3", *COSTS]


def comparable(path):
    """Everything a store says about its points but the time each took and where files went."""
    return sorted((r["key"], r["name"], r["value"], r["bound"], r["status"], tuple(r["peak_memory"]), r["fits"])
                  for r in Store(path).results())


def small_sweep(path, **where):
    costs = cost_model(None, [StageCost(1.0, 1.5, 0.5, 1.0, 0.5)] * 2, 2, 0.1, True, None, "ms")
    grid = points([2, 3], ["single", "vshape"], [4], ["1x", "2x"], ["makespan"], costs)
    store = Store(path, store_settings(costs, SolverSettings(time_limit=1, workers=1)))
    result = run_sweep(store, grid, path.parent / (path.stem + "-schedules"), **where)
    store.close()
    return result


def test_the_pool_and_a_local_ray_write_the_same_store(tmp_path, command_run):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'zbsolve[cluster]')")
    pool = command_run[0] / "s.db"  # the command's own sweep, through the process pool
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert small_sweep(tmp_path / "ray.db", ray="local") == (8, 0, 0)
    finally:
        ray.shutdown()
    assert comparable(pool) == comparable(tmp_path / "ray.db")
    assert len(comparable(pool)) > 8  # the solve and the baselines of every point
    assert len(list((tmp_path / "ray-schedules").glob("*.json"))) == 8
    assert small_sweep(tmp_path / "ray.db", jobs=2) == (0, 8, 0)  # all done: nothing run again


def sweep_command(store, *extra, grid=GRID):
    return [sys.executable, "-m", "zbsolve", "sweep", *grid, "--store", str(store), *extra]


def test_a_stopped_sweep_finishes_only_the_missing_points(tmp_path):
    whole = subprocess.run(sweep_command(tmp_path / "whole.db", "-q", grid=SLOW), capture_output=True,
                           text=True, cwd=REPO_ROOT, timeout=600)
    assert whole.returncode == 0, whole.stderr
    cut = tmp_path / "cut.db"
    run = subprocess.Popen(sweep_command(cut, "--jobs", "1", grid=SLOW), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, cwd=REPO_ROOT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and run.poll() is None:  # stop it once a point is in
        if cut.exists():
            try:
                if sqlite3.connect(cut).execute("SELECT count(*) FROM points WHERE state = 'done'").fetchone()[0]:
                    break
            except sqlite3.OperationalError:
                pass  # the tables are not made yet
        time.sleep(0.05)
    os.kill(run.pid, signal.SIGTERM)
    _, err = run.communicate(timeout=120)
    assert run.returncode in (0, 130), err  # 0: every point was in before the signal came
    if run.returncode == 130:
        assert "the same command finishes the rest" in err
    states = dict(sqlite3.connect(cut).execute("SELECT state, count(*) FROM points GROUP BY state").fetchall())
    assert "running" not in states  # handed back for the next run
    done = states.get("done", 0)
    assert done >= 1
    again = subprocess.run(sweep_command(cut, "-q", grid=SLOW), capture_output=True, text=True, cwd=REPO_ROOT,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{3 - done} points solved now, {done} found done" in again.stdout
    assert comparable(cut) == comparable(tmp_path / "whole.db")


@pytest.fixture(scope="module")
def command_run(tmp_path_factory):
    """The grid swept once by the command, shared: a sweep starts processes."""
    folder = tmp_path_factory.mktemp("command")
    out = subprocess.run(
        sweep_command(folder / "s.db", "--report", "--plot", str(folder / "f.png"), "--csv",
                      str(folder / "f.csv"), "--json", str(folder / "f.json")),
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    return folder, out


def test_the_command_prints_the_frontier_and_writes_store_plot_and_csv(command_run):
    tmp_path, out = command_run
    assert out.returncode == 0, out.stderr
    assert "Frontier over all placements" in out.stdout and "Frontier of vshape:" in out.stdout
    assert "[8/8] P=3 " in out.stderr or "[8/8] P=2 " in out.stderr
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "f.csv").read_text().startswith("placement,devices,microbatches,memory")
    assert len(list((tmp_path / "s-schedules").glob("*.json"))) == 8
    again = subprocess.run([sys.executable, "-m", "zbsolve", "frontier", str(tmp_path / "s.db")],
                           capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert again.returncode == 0 and again.stdout.split("\n\n")[0] in out.stdout
    other = subprocess.run(sweep_command(tmp_path / "s.db").__add__(["--seed", "3"]), capture_output=True,
                           text=True, cwd=REPO_ROOT, timeout=120)
    assert other.returncode == 2 and "other settings (solver)" in other.stderr
