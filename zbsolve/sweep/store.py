"""A sweep's results in one SQLite file: its settings, every point's state, and per point one
row for the solve and one per baseline. Each change is one transaction, so a second sweep on
the same file, a killed driver or a full disk never leaves half a point behind."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from zbsolve.errors import UsageError

from .grid import Point
from .store_file import columns, open_store, said_in_one_line

RESULT_FIELDS = ("value", "bound", "gap", "status", "makespan", "span", "peak_memory", "peak_x", "fits",
                 "limit", "seconds")


LEASE_S = 120.0  # a claim not renewed for this long is taken over by another sweep, on any host


def me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(owner: str) -> bool:
    """Whether a claim's owner on this host still runs (a pid that is gone: not)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, OverflowError):  # no such process; a pid no process can have
        return False
    except PermissionError:
        return True
    return True


class Store:
    def __init__(self, path: str | os.PathLike, settings: dict | None = None, *, lease_s: float = LEASE_S) -> None:
        """Open a store: with `settings`, to write (a new file is made a store; a store made with
        other settings is refused); without, read-only (frontier). Only a new file or zbsolve's
        own store is opened (store_file.py)."""
        self.path, self.lease_s = Path(path), lease_s
        self.db, empty = open_store(self.path, writable=settings is not None)
        with said_in_one_line(self.path):
            row = None if empty else self.db.execute("SELECT settings FROM sweep").fetchone()
            if settings is None:
                if row is None:
                    raise UsageError(f"{self.path} holds no sweep")
                self.settings = json.loads(row[0])
                if not isinstance(self.settings, dict) or not isinstance(self.settings.get("costs"), dict):
                    raise UsageError(f"{self.path}: the store is damaged (its settings are not a sweep's)")
                return
            text = json.dumps(settings, sort_keys=True)
            if row is None:
                self.db.execute("INSERT OR IGNORE INTO sweep VALUES (1, ?)", (text,))
                row = self.db.execute("SELECT settings FROM sweep").fetchone()
            stored = json.loads(row[0])
        if not isinstance(stored, dict):
            raise UsageError(f"{self.path}: the store is damaged (its settings are not a sweep's)")
        if stored != json.loads(text):
            differ = sorted(k for k in settings if stored.get(k) != settings[k])
            raise UsageError(f"{self.path} holds a sweep with other settings ({', '.join(differ)}); "
                             "give another --store, or the same costs and solver settings")
        self.settings = settings

    def close(self) -> None:
        self.db.close()

    def add(self, points: Iterable[Point]) -> None:
        with self._transaction():
            self.db.executemany(
                "INSERT OR IGNORE INTO points (key, devices, placement, microbatches, memory, objective, partition, "
                "levers) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(p.key, p.devices, p.placement, p.microbatches, p.memory, p.objective, p.partition, p.levers)
                 for p in points])

    def claim(self, points: list[Point], limit: int | None = None) -> tuple[list[Point], int, int]:
        """Take up to `limit` of the points not done and not held by a live sweep: (claimed,
        done, held elsewhere). A claim is a lease: a point whose owner has not renewed it
        (`heartbeat`) for `lease_s`, or whose owner on this host is gone, is taken again."""
        owner, wanted, now = me(), {p.key: p for p in points}, time.time()
        with self._transaction():
            rows = self.db.execute("SELECT key, state, owner, heartbeat FROM points").fetchall()
            order = {p.key: k for k, p in enumerate(points)}
            claimed: list[Point] = []
            done = held = 0
            for key, state, holder, beat in sorted(rows, key=lambda r: order.get(r[0], -1)):
                if key not in wanted:
                    continue
                if state == "done":
                    done += 1
                elif state == "running" and holder == owner:
                    continue  # in this sweep's own hands already
                elif state == "running" and beat is not None and now - beat < self.lease_s and _alive(holder or ""):
                    held += 1
                elif limit is None or len(claimed) < limit:
                    claimed.append(wanted[key])
            self.db.executemany("UPDATE points SET state = 'running', owner = ?, heartbeat = ? WHERE key = ?",
                                [(owner, now, p.key) for p in claimed])
        return claimed, done, held

    def renew(self) -> None:
        """Renew this sweep's leases: its claims stay its own while it runs."""
        with self._transaction():
            self.db.execute("UPDATE points SET heartbeat = ? WHERE owner = ? AND state = 'running'",
                            (time.time(), me()))

    def fail(self, point: Point, reason: str) -> None:
        """A point that cannot be solved here (its worker died twice): failed, with the reason."""
        with self._transaction():
            self.db.execute("UPDATE points SET state = 'failed', owner = NULL, status = 'error', message = ? "
                            "WHERE key = ?", (reason, point.key))

    def finish(self, point: Point, outcome: dict, schedule_path: str | None, seconds: float) -> None:
        with self._transaction():
            self.db.execute("DELETE FROM results WHERE key = ?", (point.key,))
            self.db.executemany(
                f"INSERT INTO results VALUES (?, ?, {', '.join('?' * len(RESULT_FIELDS))})",
                [(point.key, name, *[_column(field, row[field]) for field in RESULT_FIELDS])
                 for name, row in outcome["rows"].items()])
            self.db.execute(
                "UPDATE points SET state = ?, owner = NULL, status = ?, message = ?, schedule_path = ?, "
                "seconds = ? WHERE key = ?",
                ("failed" if outcome.get("error") else "done", outcome["status"],
                 outcome.get("message") or outcome.get("error"), schedule_path, round(seconds, 3), point.key))

    def release(self) -> int:
        """Hand back this sweep's unfinished points (after an interrupt): the next run takes them."""
        with self._transaction():
            cursor = self.db.execute("UPDATE points SET state = 'pending', owner = NULL "
                                     "WHERE owner = ? AND state = 'running'", (me(),))
        return cursor.rowcount

    def points(self) -> list[dict]:
        with said_in_one_line(self.path):
            cursor = self.db.execute("SELECT * FROM points ORDER BY devices, placement, microbatches, memory, "
                                     "objective")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def results(self) -> list[dict]:
        with said_in_one_line(self.path):
            # a store from before partitions or levers (read as it is) has no such column
            had = columns(self.db, "points")
            split, levers = (f"p.{c}" if c in had else f"NULL AS {c}" for c in ("partition", "levers"))
            cursor = self.db.execute(
                f"SELECT p.devices, p.placement, p.microbatches, p.memory, p.objective, {split}, {levers}, "
                "p.schedule_path, r.* "
                "FROM results r JOIN points p ON p.key = r.key WHERE p.state = 'done' ORDER BY r.key, r.name")
            names = [d[0] for d in cursor.description]
            rows = [dict(zip(names, row)) for row in cursor.fetchall()]
        try:
            for row in rows:
                row["peak_memory"] = json.loads(row["peak_memory"])
                row["memory_limit"] = json.loads(row["memory_limit"]) if row["memory_limit"] else None
                row["fits"] = bool(row["fits"])
        except (ValueError, TypeError) as error:
            raise UsageError(f"{self.path}: the store is damaged (a result row does not read: {error})") from None
        return rows

    def _transaction(self):
        return _Transaction(self.db, self.path)


def _column(field: str, value):
    return json.dumps(value) if field in ("peak_memory", "limit") and value is not None else value


class _Transaction:
    """BEGIN IMMEDIATE takes the write lock up front, so two sweeps never interleave a change;
    SQLite's failures (a damaged or read-only file) come out as one line."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path

    def __enter__(self) -> None:
        with said_in_one_line(self.path):
            self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, traceback) -> Literal[False]:
        if kind is not None:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(value, sqlite3.DatabaseError):
                with said_in_one_line(self.path):
                    raise value
            return False
        with said_in_one_line(self.path):
            self.db.execute("COMMIT")
        return False
