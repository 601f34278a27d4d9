"""Which files a store opens: a new file or zbsolve's own; any other SQLite file or damaged
store is refused in one line and left as it was; readers open read-only."""

import contextlib
import hashlib
import io
import shutil
import sqlite3
import subprocess

import pytest
from helpers import REPO_ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.cli import main
from zbsolve.errors import UsageError
from zbsolve.sweep.grid import Point
from zbsolve.sweep.store import Store
from zbsolve.sweep.store_file import APPLICATION_ID, SCHEMA_VERSION, VERSION_1

SETTINGS = {"costs": {"comm": 0.0, "time_unit": "ms"}, "solver": {"time_limit": 1}}
ROW = {"value": 10.0, "bound": 9.0, "gap": 0.1, "status": "feasible", "makespan": 10.0, "span": 9.5,
       "peak_memory": [1.0, 2.0], "peak_x": 0.5, "fits": True, "limit": [4.0, 4.0], "seconds": 0.1}
SWEEP = ["sweep", "--stages", "2", "--placements", "single", "--microbatches", "2", "--memory", "1x",
         "--time-limit", "1", "--jobs", "1", "-q", "--store"]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def foreign(path, sql="CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada')"):
    with sqlite3.connect(path) as db:
        db.executescript(sql)
    return digest(path)


def small_store(path):
    store = Store(path, SETTINGS)
    points = [Point(2, "single", m, "1x", "makespan") for m in (2, 3)]
    store.add(points)
    store.claim(points)
    for point in points:
        store.finish(point, {"rows": {"solved": ROW, "1f1b": {**ROW, "status": "baseline"}},
                             "status": "feasible", "message": None}, None, 0.1)
    store.close()
    return path


@pytest.mark.parametrize("sql, says", [
    ("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada')", "it holds table users"),
    ("CREATE TABLE points (name TEXT)", "it holds table points"),
    ("PRAGMA application_id = 42; CREATE TABLE t (x)", "another application's file, id 0x2a"),
])
def test_another_sqlite_file_is_refused_by_both_commands_and_left_as_it_was(capsys, tmp_path, sql, says):
    path = tmp_path / "foreign.db"
    before = foreign(path, sql)
    for argv in (["frontier", str(path)], [*SWEEP, str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"is not a sweep store ({says}): nothing was written to it" in err and len(err.splitlines()) == 1
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]  # no -wal, -shm or schedules


def test_an_empty_file_is_no_sweep_to_read_and_a_new_store_to_write(capsys, tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    assert main(["frontier", str(path)]) == 2
    assert "holds no sweep (an empty file)" in capsys.readouterr().err and path.stat().st_size == 0
    assert main([*SWEEP, str(path)]) == 0
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_store_from_before_the_header_is_read_as_it_is_and_upgraded_by_a_writer(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(REPO_ROOT / "benchmarks" / "sweep" / "zb-1.5b.db", path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == 0
        assert {t: [r[1] for r in db.execute(f"PRAGMA table_info({t!r})")] for t in VERSION_1} == VERSION_1
    before = digest(path)
    old = Store(path)
    assert len(old.results()) > 100 and old.settings["solver"]["solver"] == "cpsat"
    old.close()
    assert digest(path) == before  # read-only
    Store(path, old.settings).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert {"heartbeat", "partition"} <= {r[1] for r in db.execute("PRAGMA table_info(points)")}
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_version_2_store_is_read_as_it_is_and_given_partitions_and_levers_by_a_writer(tmp_path):
    path = small_store(tmp_path / "v2.db")
    with sqlite3.connect(path) as db:  # back to version 2: the points as they were before partitions
        db.execute("ALTER TABLE points DROP COLUMN partition")
        db.execute("ALTER TABLE points DROP COLUMN levers")
        db.execute("PRAGMA user_version = 2")
    before = digest(path)
    old = Store(path)
    assert {(r["key"], r["name"], r["partition"], r["levers"]) for r in old.results()} == {
        (f"P=2 single M={m} memory=1x makespan", name, None, None) for m in (2, 3) for name in ("solved", "1f1b")}
    old.close()
    assert digest(path) == before  # read-only
    store = Store(path, SETTINGS)
    store.add([Point(2, "single", 4, "1x", "makespan", "auto"), Point(2, "single", 5, "1x", "makespan",
                                                                       levers="recompute")])
    assert [(p["partition"], p["levers"]) for p in store.points()] == [(None, None)] * 2 + [
        ("auto", None), (None, "recompute")]
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4


def test_a_damaged_schema_quoted_by_sqlite_is_still_one_line(capsys, tmp_path):
    path = small_store(tmp_path / "s.db")
    data = bytearray(path.read_bytes())
    data[3181:3185] = b"X\x00\x00\x00"  # found by the fuzz test below: SQLite quotes the schema, newlines and all
    path.write_bytes(bytes(data))
    assert main(["frontier", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged" in err


def test_a_damaged_store_is_one_line_from_both_commands(capsys, tmp_path):
    path = small_store(tmp_path / "s.db")
    data = bytearray(path.read_bytes())
    data[2048:6144] = b"\xff" * 4096  # pages overwritten mid-file
    path.write_bytes(bytes(data))
    for argv in (["frontier", str(path)], [*SWEEP, str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and str(path) in err and "damaged" in err, err


def chattr(flag: str, path) -> None:
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"chattr {flag} is not allowed here: {done.stderr.decode().strip()}")


def test_an_immutable_store_is_read_and_refused_for_writing_in_one_line(capsys, tmp_path):
    folder = tmp_path / "store"
    folder.mkdir()
    path = small_store(folder / "s.db")
    chattr("+i", path)
    chattr("+i", folder)  # as on a read-only mount: no lock files can be made beside it
    try:
        assert main(["frontier", str(path)]) == 0
        out = capsys.readouterr().out
        assert "single" in out and "10" in out  # the two points' frontier, read through the lock
        settings_of = Store(path).settings
        with pytest.raises(UsageError, match="cannot write to the store"):
            Store(path, settings_of)
    finally:
        subprocess.run(["chattr", "-i", str(folder)])
        subprocess.run(["chattr", "-i", str(path)])


@settings(max_examples=150)
@given(edits=st.lists(st.tuples(st.integers(0, 2 ** 20), st.binary(min_size=1, max_size=64)), min_size=1,
                      max_size=4))
def test_random_bytes_anywhere_in_a_store_give_one_line_or_a_result_and_write_nothing(edits, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    path = small_store(folder / "s.db")
    data = bytearray(path.read_bytes())
    for offset, chunk in edits:
        at = offset % len(data)
        data[at:at + len(chunk)] = chunk
    path.write_bytes(bytes(data))
    before = digest(path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["frontier", str(path)])
    assert (code, err.getvalue().count("\n")) in ((0, 0), (2, 1)), err.getvalue()
    assert code == 0 or str(path) in err.getvalue()
    assert digest(path) == before  # read-only
    try:
        Store(path, SETTINGS).close()  # a writer writes only to what is still zbsolve's store
    except UsageError as error:
        assert "\n" not in str(error)
        if "not a sweep store" in str(error):
            assert digest(path) == before
