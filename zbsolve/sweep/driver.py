"""Run a sweep's points: locally in a process pool, or as tasks on an existing Ray cluster.
Either way results come back to this process, which alone writes the store and the files."""

from __future__ import annotations

import multiprocessing
import os
import re
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from zbsolve.errors import UsageError
from zbsolve.formats.atomic_files import write_atomic

from .grid import CostModel, Point, to_dict
from .store import Store
from .work import ignore_interrupts, solve_point


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


def _in_pool(tasks: list[dict], jobs: int) -> Iterator[tuple[str, dict, float]]:
    pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(tasks)), initializer=ignore_interrupts)
    try:
        yield from pool.imap_unordered(_guarded, tasks)
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def _on_ray(tasks: list[dict], address: str, workers: int) -> Iterator[tuple[str, dict, float]]:
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'zbsolve[cluster]'") from None
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, log_to_driver=False,
                     include_dashboard=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise UsageError(f"--ray: cannot reach a Ray cluster at {address!r}: {error}") from None
    remote = ray.remote(num_cpus=workers, max_retries=0)(_guarded)
    pending = [remote.remote(task) for task in tasks]
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


def schedule_file(folder: Path, point: Point) -> Path:
    return folder / (re.sub(r"[^A-Za-z0-9.=-]+", "_", point.key) + ".json")


def run_sweep(store: Store, points: list[Point], schedules: Path, *, jobs: int = 1, ray: str | None = None,
              progress: Callable[[Report], None] | None = None) -> tuple[int, int, int]:
    """Solve the points not yet done; returns (solved now, done before, held by another sweep).
    On KeyboardInterrupt the unfinished points are handed back and the interrupt re-raised."""
    store.add(points)
    claimed, done_before, held = store.claim(points)
    if not claimed:
        return 0, done_before, held
    schedules.mkdir(parents=True, exist_ok=True)
    by_key = {p.key: p for p in claimed}
    tasks = [_task(p, store.settings) for p in claimed]
    workers = store.settings["solver"]["workers"]
    began, solved = time.monotonic(), 0
    results = _on_ray(tasks, ray, workers) if ray is not None else _in_pool(tasks, jobs)
    try:
        for key, outcome, seconds in results:
            point = by_key[key]
            path = None
            if outcome.get("schedule"):
                path = schedule_file(schedules, point)
                write_atomic(path, outcome["schedule"])
            store.finish(point, outcome, str(path) if path else None, seconds)
            solved += 1
            if progress is not None:
                elapsed = time.monotonic() - began
                left = elapsed / solved * (len(claimed) - solved)
                progress(Report(done_before + solved, done_before + len(claimed) + held, point, outcome,
                                elapsed, left))
    except BaseException:
        results.close()  # stops the pool's processes (or cancels the Ray tasks) now, not at exit
        store.release()
        raise
    return solved, done_before, held
