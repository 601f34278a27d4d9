"""Run a sweep's points: locally in a process pool, or as tasks on an existing Ray cluster.
Either way results come back to this process, which alone writes the store and the files."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import socket
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from pathlib import Path

from zbsolve.errors import UsageError
from zbsolve.formats.atomic_files import write_atomic

from .grid import CostModel, Point, to_dict
from .store import Store
from .work import solve_point, worker_start


@dataclass(frozen=True)
class SolverSettings:
    solver: str = "cpsat"
    time_limit: float = 30.0
    workers: int = 1
    seed: int = 0
    deterministic: bool | None = None


@dataclass
class Report:
    """What the progress callback sees after each point."""

    done: int  # this run and earlier runs
    total: int
    point: Point
    outcome: dict
    elapsed_s: float
    left_s: float | None  # estimated from this run's pace


def store_settings(costs: CostModel, solver: SolverSettings) -> dict:
    return {"costs": to_dict(costs), "solver": asdict(solver)}


def default_jobs(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _task(point: Point, settings: dict) -> dict:
    return {"point": asdict(point), "costs": settings["costs"], "solver": settings["solver"]}


def _guarded(task: dict) -> tuple[str, dict, float]:
    """solve_point, with any failure returned as the point's outcome instead of ending the sweep."""
    began = time.monotonic()
    try:
        outcome = solve_point(task)
    except Exception as error:  # a bug or a refusal: recorded against the point, the rest go on
        outcome = {"rows": {}, "status": "error", "schedule": None,
                   "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc(limit=5)}
    return Point(**task["point"]).key, outcome, time.monotonic() - began


class _Pool:
    """Local worker processes: points go in as there is room, results come back as they finish.
    A worker that dies (the OOM killer, a signal) breaks the pool: its points come back as
    `died` and a new pool takes the next ones."""

    def __init__(self, jobs: int, driver: int) -> None:
        self.jobs, self.driver = jobs, driver
        self.executor: ProcessPoolExecutor | None = None
        self.running: dict[Future, str] = {}

    def room(self) -> int:
        return self.jobs - len(self.running)

    def submit(self, key: str, task: dict) -> None:
        if self.executor is None:
            _quiet_orphans()
            self.executor = ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=worker_start, initargs=(self.driver,))
        self.running[self.executor.submit(_guarded, task)] = key

    def next(self, wait_s: float) -> tuple[list[tuple[str, dict, float]], list[str]]:
        """What finished within `wait_s`: (results, keys whose worker died)."""
        done, _ = wait(list(self.running), timeout=wait_s, return_when=FIRST_COMPLETED)
        finished, died = [], []
        for future in done:
            key = self.running.pop(future)
            try:
                finished.append(future.result())
            except BrokenProcessPool:
                died.append(key)
        if died:  # the pool is broken: every point still in it died with it
            died += list(self.running.values())
            self.running.clear()
            self.close()
        return finished, died

    def close(self) -> None:
        if self.executor is not None:
            for process in list(getattr(self.executor, "_processes", {}).values()):
                process.terminate()  # stop the points in flight now, not when they finish
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None


def _quiet_orphans() -> None:
    """When the driver is killed its resource tracker would warn of the pool's semaphores as
    leaked; they are the pool's, and the tracker cleans them up."""
    ignore = "ignore::UserWarning:multiprocessing.resource_tracker"
    current = os.environ.get("PYTHONWARNINGS", "")
    if ignore not in current:
        os.environ["PYTHONWARNINGS"] = f"{current},{ignore}" if current else ignore


class _RayPool:
    """Ray tasks, as many in flight as the cluster has room for; a task whose worker died comes
    back as `died`."""

    def __init__(self, address: str, workers: int) -> None:
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'zbsolve[cluster]'") from None
        self.ray = ray
        if not ray.is_initialized():
            connect_to_ray(ray, address)
        self.remote = ray.remote(num_cpus=workers, max_retries=0)(_guarded)
        self.jobs = max(1, int(ray.cluster_resources().get("CPU", 1) // max(1, workers)))
        self.running: dict = {}

    def room(self) -> int:
        return self.jobs - len(self.running)

    def submit(self, key: str, task: dict) -> None:
        self.running[self.remote.remote(task)] = key

    def next(self, wait_s: float) -> tuple[list[tuple[str, dict, float]], list[str]]:
        ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=wait_s)
        finished, died = [], []
        for ref in ready:
            key = self.running.pop(ref)
            try:
                finished.append(self.ray.get(ref))
            except self.ray.exceptions.RayError:  # the task's worker died; _guarded returns every other failure
                died.append(key)
        return finished, died

    def close(self) -> None:
        for ref in self.running:
            self.ray.cancel(ref, force=True)
        self.running.clear()


def connect_to_ray(ray, address: str, timeout_s: float = 5.0) -> None:
    """ray.init, after a look at HOST:PORT: with nothing listening there, ray.init waits for ever
    and warns every 10 s; here that is one line."""
    match = re.fullmatch(r"(?:ray://)?([^:/]+):(\d+)", address)
    if match:
        try:
            socket.create_connection((match.group(1), int(match.group(2))), timeout=timeout_s).close()
        except OSError as error:
            raise UsageError(f"--ray: cannot reach a Ray cluster at {address} ({error.strerror or error}); "
                             "start one (ray start --head) or give --ray local") from None
    ours = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(address=None if address == "local" else address, log_to_driver=False, include_dashboard=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise UsageError(f"--ray: cannot reach a Ray cluster at {address!r}: {error}") from None
    finally:
        signal.signal(signal.SIGTERM, ours)  # ray.init puts its own in; the caller's stops the sweep cleanly


def schedule_file(folder: Path, point: Point) -> Path:
    return folder / (re.sub(r"[^A-Za-z0-9.=-]+", "_", point.key) + ".json")


def run_sweep(store: Store, points: list[Point], schedules: Path, *, jobs: int = 1, ray: str | None = None,
              progress: Callable[[Report], None] | None = None,
              notify: Callable[[str], None] = lambda text: None) -> tuple[int, int, int]:
    """Solve the points not yet done; returns (solved now, done before, held by another sweep).
    Points are claimed as workers free up, so that sweeps sharing a store share its points; the
    claims' leases are renewed while they run. A point whose worker died is run again alone,
    and failed if it dies again. On KeyboardInterrupt the unfinished points are handed back and
    the interrupt re-raised."""
    workers = store.settings["solver"]["workers"]
    pool: _Pool | _RayPool = _RayPool(ray, workers) if ray is not None else _Pool(jobs, os.getpid())
    store.add(points)
    _, done_before, _ = store.claim(points, limit=0)
    began, solved, failed, held = time.monotonic(), 0, 0, 0
    strikes: dict[str, int] = {}  # points whose worker died, and how often
    by_key = {p.key: p for p in points}
    renewed = time.monotonic()
    try:
        while True:
            suspects = [k for k, n in strikes.items() if n == 1 and k not in pool.running.values()]
            alone = bool(strikes) and any(n == 1 for n in strikes.values())  # find which point kills
            while pool.room() > 0 and not (alone and pool.running):
                if suspects:
                    claimed = [by_key[suspects.pop(0)]]  # still this sweep's: its lease was renewed
                else:
                    claimed, _, held = store.claim(points, limit=1)
                if not claimed:
                    break
                pool.submit(claimed[0].key, _task(claimed[0], store.settings))
            if not pool.running:
                break
            finished, died = pool.next(wait_s=min(5.0, store.lease_s / 4))
            if time.monotonic() - renewed > store.lease_s / 4:
                store.renew()
                renewed = time.monotonic()
            for key in died:
                strikes[key] = strikes.get(key, 0) + 1
                if strikes[key] >= 2:
                    store.fail(by_key[key], "its worker process died twice while solving it (killed, or out "
                                            "of memory)")
                    failed += 1
                again = "failed: it died twice" if strikes[key] >= 2 else "solving it again, alone"
                notify(f"a worker process died while solving {key}: {again}")
            for key, outcome, seconds in finished:
                strikes.pop(key, None)
                point = by_key[key]
                path = None
                if outcome.get("schedule"):
                    path = schedule_file(schedules, point)
                    schedules.mkdir(parents=True, exist_ok=True)
                    write_atomic(path, outcome["schedule"])
                store.finish(point, outcome, str(path) if path else None, seconds)
                solved += 1
                if progress is not None:
                    elapsed = time.monotonic() - began
                    left = len(points) - done_before - solved - failed  # here or with another sweep
                    progress(Report(done_before + solved, len(points), point, outcome, elapsed,
                                    elapsed / solved * left))
            strikes = {k: n for k, n in strikes.items() if n < 2}
    except BaseException:
        pool.close()  # stops the pool's processes (or cancels the Ray tasks) now, not at exit
        store.release()
        raise
    pool.close()
    return solved, done_before, held
