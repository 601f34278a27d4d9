"""A sweep's results in one SQLite file: its settings, every point's state, and per point one
row for the solve and one per baseline. Each change is one transaction, so a second sweep on
the same file, a killed driver or a full disk never leaves half a point behind."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from zbsolve.errors import UsageError

from .grid import Point

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweep (id INTEGER PRIMARY KEY CHECK (id = 1), settings TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY, devices INTEGER NOT NULL, placement TEXT NOT NULL,
    microbatches INTEGER NOT NULL, memory TEXT NOT NULL, objective TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending', owner TEXT, status TEXT, message TEXT,
    schedule_path TEXT, seconds REAL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT NOT NULL REFERENCES points(key), name TEXT NOT NULL, value REAL NOT NULL,
    bound REAL, gap REAL, status TEXT NOT NULL, makespan REAL NOT NULL, span REAL NOT NULL,
    peak_memory TEXT NOT NULL, peak_x REAL, fits INTEGER NOT NULL, memory_limit TEXT,
    seconds REAL NOT NULL, PRIMARY KEY (key, name));
"""

RESULT_FIELDS = ("value", "bound", "gap", "status", "makespan", "span", "peak_memory", "peak_x", "fits",
                 "limit", "seconds")


def me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(owner: str) -> bool:
    """Whether the sweep that claimed a point still runs; another host's claim is trusted."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Store:
    def __init__(self, path: str | os.PathLike, settings: dict | None = None) -> None:
        """Open (or with `settings`, create) the store; a store made with other settings is refused."""
        self.path = Path(path)
        if settings is None and not self.path.is_file():
            raise UsageError(f"no sweep store at {self.path}")
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as error:
            raise UsageError(f"{self.path} is not a sweep store: {error}") from None
        row = self.db.execute("SELECT settings FROM sweep").fetchone()
        if settings is None:
            if row is None:
                raise UsageError(f"{self.path} holds no sweep")
            self.settings = json.loads(row[0])
            return
        text = json.dumps(settings, sort_keys=True)
        if row is None:
            self.db.execute("INSERT OR IGNORE INTO sweep VALUES (1, ?)", (text,))
            row = self.db.execute("SELECT settings FROM sweep").fetchone()
        if json.loads(row[0]) != json.loads(text):
            differ = sorted(k for k in settings if json.loads(row[0]).get(k) != settings[k])
            raise UsageError(f"{self.path} holds a sweep with other settings ({', '.join(differ)}); "
                             "give another --store, or the same costs and solver settings")
        self.settings = settings

    def close(self) -> None:
        self.db.close()

    def add(self, points: Iterable[Point]) -> None:
        with self._transaction():
            self.db.executemany(
                "INSERT OR IGNORE INTO points (key, devices, placement, microbatches, memory, objective) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(p.key, p.devices, p.placement, p.microbatches, p.memory, p.objective) for p in points])

    def claim(self, points: list[Point]) -> tuple[list[Point], int, int]:
        """Take the points not done and not held by a live sweep: (claimed, done, held elsewhere).
        A point left running by a sweep that died is taken again."""
        owner, wanted = me(), {p.key: p for p in points}
        with self._transaction():
            rows = self.db.execute("SELECT key, state, owner FROM points").fetchall()
            claimed, done, held = [], 0, 0
            for key, state, holder in rows:
                if key not in wanted:
                    continue
                if state == "done":
                    done += 1
                elif state == "running" and holder != owner and _alive(holder or ""):
                    held += 1
                else:
                    claimed.append(wanted[key])
            self.db.executemany("UPDATE points SET state = 'running', owner = ? WHERE key = ?",
                                [(owner, p.key) for p in claimed])
        return claimed, done, held

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
        cursor = self.db.execute("SELECT * FROM points ORDER BY devices, placement, microbatches, memory, objective")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def results(self) -> list[dict]:
        cursor = self.db.execute(
            "SELECT p.devices, p.placement, p.microbatches, p.memory, p.objective, p.schedule_path, r.* "
            "FROM results r JOIN points p ON p.key = r.key WHERE p.state = 'done' ORDER BY r.key, r.name")
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row)) for row in cursor.fetchall()]
        for row in rows:
            row["peak_memory"] = json.loads(row["peak_memory"])
            row["memory_limit"] = json.loads(row["memory_limit"]) if row["memory_limit"] else None
            row["fits"] = bool(row["fits"])
        return rows

    def _transaction(self):
        return _Transaction(self.db)


def _column(field: str, value):
    return json.dumps(value) if field in ("peak_memory", "limit") and value is not None else value


class _Transaction:
    """BEGIN IMMEDIATE takes the write lock up front, so two sweeps never interleave a change."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, traceback) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
