"""What an output path may be: a regular file (new or replaced), or a symbolic link to one,
written through. Everything else is refused before any work, and left as it was."""

import os
import stat
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zbsolve.errors import OutputError
from zbsolve.formats.atomic_files import check_writable, write_atomic


def test_a_fifo_is_refused_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="it is a FIFO; zbsolve writes regular files only"):
        write_atomic(fifo, "{}")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_refused_and_stays_a_device():
    with pytest.raises(OutputError, match="/dev/null: it is a device"):
        check_writable("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_directory_and_a_socket_are_refused(tmp_path):
    import socket

    with pytest.raises(OutputError, match="it is a directory"):
        check_writable(tmp_path)
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(OutputError, match="it is a socket"):
            check_writable(path)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_a_symbolic_link_is_written_through_and_stays_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    write_atomic(link, "new")
    assert os.path.islink(link) and os.readlink(link) == "real.json"
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]  # no temporary left


def test_a_link_to_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to("fifo")
    with pytest.raises(OutputError, match="it is a FIFO"):
        check_writable(tmp_path / "link")


def test_an_empty_name_and_a_folder_that_takes_no_file_are_refused(tmp_path):
    with pytest.raises(OutputError, match="an output file name is empty"):
        check_writable("")
    if os.path.isdir("/proc") and not _takes_files("/proc"):
        with pytest.raises(OutputError, match="folder /proc takes no new file"):
            check_writable("/proc/zb.json")


def _takes_files(folder: str) -> bool:
    try:
        handle, name = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(handle)
    os.unlink(name)
    return True


KINDS = ["missing", "file", "directory", "fifo", "socket", "link to file", "dangling link", "link to directory"]


@settings(max_examples=len(KINDS) * 3, deadline=None)
@given(st.sampled_from(KINDS))
def test_every_kind_of_target_is_written_or_refused_untouched(tmp_path_factory, kind):
    import socket

    folder = tmp_path_factory.mktemp("target")
    path = folder / "out"
    server = None
    if kind == "file":
        path.write_text("old")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    elif kind.startswith("link"):
        (folder / "dir").mkdir()
        (folder / "there").write_text("old")
        path.symlink_to({"link to file": "there", "link to directory": "dir"}[kind])
    elif kind == "dangling link":
        path.symlink_to("nowhere")
    before = os.lstat(path).st_mode if os.path.lexists(path) else None
    try:
        write_atomic(path, "new")
    except OutputError:
        assert kind in ("directory", "fifo", "socket", "link to directory")
        assert os.lstat(path).st_mode == before  # untouched
    else:
        assert kind in ("missing", "file", "link to file", "dangling link")
        written = {"link to file": folder / "there", "dangling link": folder / "nowhere"}.get(kind, path)
        assert written.read_text() == "new"
        assert os.path.islink(path) == kind.endswith("link") or kind == "link to file"
    finally:
        if server is not None:
            server.close()
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    assert leftovers == []
