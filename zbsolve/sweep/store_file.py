"""Opening a sweep store's SQLite file: only a new (empty) file or zbsolve's own store is
taken, and nothing is written to any other; a reader opens it read-only; a damaged or
unwritable file is one line, not a traceback (docs/sweeps.md, "The store file")."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from zbsolve.errors import UsageError

APPLICATION_ID = 0x7A627377  # "zbsw" in the SQLite header: this file is a zbsolve sweep store
# 1: before leases (no heartbeat column); 2: claims are leases; 3: points have a partition; 4: and levers
SCHEMA_VERSION = 4
HEADER = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweep (id INTEGER PRIMARY KEY CHECK (id = 1), settings TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY, devices INTEGER NOT NULL, placement TEXT NOT NULL,
    microbatches INTEGER NOT NULL, memory TEXT NOT NULL, objective TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending', owner TEXT, status TEXT, message TEXT,
    schedule_path TEXT, seconds REAL, heartbeat REAL, partition TEXT, levers TEXT);
CREATE TABLE IF NOT EXISTS results (
    key TEXT NOT NULL REFERENCES points(key), name TEXT NOT NULL, value REAL NOT NULL,
    bound REAL, gap REAL, status TEXT NOT NULL, makespan REAL NOT NULL, span REAL NOT NULL,
    peak_memory TEXT NOT NULL, peak_x REAL, fits INTEGER NOT NULL, memory_limit TEXT,
    seconds REAL NOT NULL, PRIMARY KEY (key, name));
"""
# The tables and columns of a version-1 store (made before the header was stamped).
VERSION_1 = {
    "sweep": ["id", "settings"],
    "points": ["key", "devices", "placement", "microbatches", "memory", "objective", "state", "owner", "status",
               "message", "schedule_path", "seconds"],
    "results": ["key", "name", "value", "bound", "gap", "status", "makespan", "span", "peak_memory", "peak_x",
                "fits", "memory_limit", "seconds"],
}


@contextmanager
def said_in_one_line(path: Path):
    """SQLite's failures on a store, and data that does not decode, as one line naming the file."""
    try:
        yield
    except (sqlite3.DatabaseError, ValueError) as error:  # ValueError: text or JSON that does not decode
        # SQLite quotes a damaged schema, newlines and control bytes and all
        text = " ".join("".join(c if c.isprintable() else " " for c in str(error)).split())
        text = text if len(text) <= 160 else text[:157] + "..."
        if "readonly" in text or "read-only" in text:
            raise UsageError(f"{path}: cannot write to the store ({text}): make it writable, or give "
                             "another --store") from None
        if "unable to open" in text:
            raise UsageError(f"{path}: cannot open the store ({text}): can its folder be written to?") from None
        if "locked" in text or "busy" in text:
            raise UsageError(f"{path}: the store stayed locked by another process ({text})") from None
        raise UsageError(f"{path}: the store is damaged or not a sweep store ({text})") from None


def open_store(path: Path, writable: bool) -> tuple[sqlite3.Connection, bool]:
    """The store's connection, checked to be zbsolve's, and whether it holds no sweep yet.
    A writer gets a new store's schema and a version-1 store's migration; a reader writes nothing."""
    if path.exists() and not path.is_file():
        raise UsageError(f"{path} is not a file")
    size = path.stat().st_size if path.exists() else 0
    if not writable and not path.exists():
        raise UsageError(f"no sweep store at {path}")
    if size:
        with open(path, "rb") as handle:
            if handle.read(len(HEADER)) != HEADER:
                raise UsageError(f"{path} is not a sweep store (not an SQLite database): nothing was written to it")
    if not writable and size == 0:
        raise UsageError(f"{path} holds no sweep (an empty file)")
    if writable and path.exists():
        try:
            os.close(os.open(path, os.O_RDWR))  # an immutable file, or one on a read-only mount
        except OSError as error:
            raise UsageError(f"{path}: cannot write to the store ({error.strerror}): make it writable, or give "
                             "another --store") from None
    with said_in_one_line(path):
        db = _connect(path, writable)
        kind = _identify(db)
        if kind.startswith("foreign"):
            db.close()
            raise UsageError(f"{path} is not a sweep store ({kind[len('foreign: '):]}): nothing was written to it; "
                             "give a new file or a store zbsolve sweep made")
        if kind == "newer":
            db.close()
            raise UsageError(f"{path} was made by a newer zbsolve (store version above {SCHEMA_VERSION})")
        if writable:
            had = columns(db, "points")
            for column, kind_of in (("heartbeat", "REAL"), ("partition", "TEXT"), ("levers", "TEXT")):  # 1 to 3
                if had and column not in had:
                    db.execute(f"ALTER TABLE points ADD COLUMN {column} {kind_of}")
            db.executescript(SCHEMA)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("PRAGMA journal_mode=WAL")
    return db, kind == "empty"


def columns(db: sqlite3.Connection, table: str) -> list[str]:
    """A table's columns (none: no such table)."""
    return [row[1] for row in db.execute(f"PRAGMA table_info({table!r})")]


def _connect(path: Path, writable: bool) -> sqlite3.Connection:
    if writable:
        return sqlite3.connect(path, timeout=60, isolation_level=None)
    uri = f"file:{quote(str(path.resolve()))}"
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=60, isolation_level=None)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:  # a WAL store in a folder it cannot write its lock files to
        db.close()
        db = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)
    return db


def _identify(db: sqlite3.Connection) -> str:
    """'ours', 'version 1', 'empty', 'newer', or 'foreign: what it holds'."""
    application = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    if application == APPLICATION_ID:
        return "newer" if version > SCHEMA_VERSION else "ours"
    if application != 0:
        return f"foreign: another application's file, id {application:#x}"
    if not tables:
        return "empty"
    if {t: columns(db, t) for t in tables} == VERSION_1:
        return "version 1"
    return f"foreign: it holds table{'s' if len(tables) > 1 else ''} {', '.join(tables)}"
