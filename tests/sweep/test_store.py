"""The store: settings kept, points claimed once, a dead sweep's points taken again, and two
processes writing one file at once leave every row whole."""

import multiprocessing
import sqlite3
import time

import pytest

from zbsolve.errors import UsageError
from zbsolve.sweep.grid import Point
from zbsolve.sweep.store import Store, me

SETTINGS = {"costs": {"comm": 0.0}, "solver": {"time_limit": 1}}
POINTS = [Point(4, "single", m, "1x", "makespan") for m in range(1, 9)]
ROW = {"value": 10.0, "bound": 9.0, "gap": 0.1, "status": "feasible", "makespan": 10.0, "span": 9.5,
       "peak_memory": [1.0, 2.0], "peak_x": 0.5, "fits": True, "limit": [4.0, 4.0], "seconds": 0.1}


def outcome(value=10.0):
    return {"rows": {"solved": {**ROW, "value": value}, "1f1b": {**ROW, "status": "baseline"}},
            "status": "feasible", "message": None}


def test_a_store_keeps_its_settings_and_refuses_others(tmp_path):
    Store(tmp_path / "s.db", SETTINGS).close()
    assert Store(tmp_path / "s.db").settings == SETTINGS
    with pytest.raises(UsageError, match="other settings .solver."):
        Store(tmp_path / "s.db", {**SETTINGS, "solver": {"time_limit": 2}})
    with pytest.raises(UsageError, match="no sweep store"):
        Store(tmp_path / "missing.db")
    (tmp_path / "text.db").write_text("not a database, just text " * 100)
    with pytest.raises(UsageError, match="not a sweep store"):
        Store(tmp_path / "text.db", SETTINGS)


def test_done_points_are_skipped_and_released_ones_taken_again(tmp_path):
    store = Store(tmp_path / "s.db", SETTINGS)
    store.add(POINTS)
    claimed, done, held = store.claim(POINTS)
    assert (len(claimed), done, held) == (8, 0, 0)
    store.finish(POINTS[0], outcome(), "a.json", 1.5)
    assert store.release() == 7
    claimed, done, held = store.claim(POINTS)
    assert ([p.key for p in claimed], done, held) == ([p.key for p in POINTS[1:]], 1, 0)
    rows = store.results()
    assert [(r["name"], r["value"], r["peak_memory"], r["fits"]) for r in rows] == [
        ("1f1b", 10.0, [1.0, 2.0], True), ("solved", 10.0, [1.0, 2.0], True)]


def test_a_point_held_by_a_live_sweep_is_left_and_a_dead_ones_taken(tmp_path):
    store = Store(tmp_path / "s.db", SETTINGS)
    store.add(POINTS[:2])
    host = me().rpartition(":")[0]
    with sqlite3.connect(tmp_path / "s.db") as db:  # both leases renewed just now
        db.execute("UPDATE points SET state = 'running', owner = ?, heartbeat = ? WHERE key = ?",
                   (f"{host}:1", time.time(), POINTS[0].key))
        db.execute("UPDATE points SET state = 'running', owner = ?, heartbeat = ? WHERE key = ?",
                   (f"{host}:{2 ** 22 + 7}", time.time(), POINTS[1].key))  # above Linux's largest pid: gone
    claimed, done, held = store.claim(POINTS[:2])
    assert ([p.key for p in claimed], done, held) == ([POINTS[1].key], 0, 1)


def test_a_claim_is_a_lease_another_host_s_is_taken_once_it_expires(tmp_path):
    store = Store(tmp_path / "s.db", SETTINGS, lease_s=60)
    store.add(POINTS[:3])
    with sqlite3.connect(tmp_path / "s.db") as db:  # a sweep on another machine: its pid cannot be asked
        for point, age in zip(POINTS[:3], (10, 59, 61)):
            db.execute("UPDATE points SET state = 'running', owner = 'elsewhere:7', heartbeat = ? WHERE key = ?",
                       (time.time() - age, point.key))
    claimed, done, held = store.claim(POINTS[:3])
    assert ([p.key for p in claimed], held) == ([POINTS[2].key], 2)  # renewed 61 s ago: expired
    store.renew()
    with sqlite3.connect(tmp_path / "s.db") as db:
        beat = db.execute("SELECT heartbeat FROM points WHERE key = ?", (POINTS[2].key,)).fetchone()[0]
    assert time.time() - beat < 5  # this sweep's own lease, renewed


def test_claims_are_taken_a_few_at_a_time_so_that_sweeps_share_the_points(tmp_path):
    store = Store(tmp_path / "s.db", SETTINGS)
    store.add(POINTS)
    claimed, _, _ = store.claim(POINTS, limit=2)
    assert [p.key for p in claimed] == [p.key for p in POINTS[:2]]
    states = {p["key"]: p["state"] for p in store.points()}
    assert sorted(states.values()) == ["pending"] * 6 + ["running"] * 2  # left for another sweep
    store.fail(POINTS[0], "its worker died twice")
    failed = next(p for p in store.points() if p["key"] == POINTS[0].key)
    assert (failed["state"], failed["message"]) == ("failed", "its worker died twice")


def _finish_many(path, keys, value):
    store = Store(path, SETTINGS)
    for key in keys:
        point = next(p for p in POINTS if p.key == key)
        for _ in range(20):
            store.finish(point, outcome(value), None, 0.0)


def test_two_processes_writing_one_store_leave_every_point_whole(tmp_path):
    path = tmp_path / "s.db"
    Store(path, SETTINGS).add(POINTS)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_finish_many, args=(path, [p.key for p in POINTS[i::2]], 1.0 + i))
               for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    rows = Store(path).results()
    assert len(rows) == 2 * len(POINTS)
    assert {(r["microbatches"], r["value"]) for r in rows if r["name"] == "solved"} == {
        (p.microbatches, 1.0 + (i % 2)) for i, p in enumerate(POINTS)}
