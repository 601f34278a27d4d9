"""Atomic file writing shared by every command that writes output."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from zbsolve.errors import OutputError


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def destination(path: str | os.PathLike) -> Path:
    """Where writing `path` lands: the file a symbolic link points to (the link stays a
    link), else the path itself."""
    target = Path(path)
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def check_writable(path: str | os.PathLike) -> Path:
    """Fail early, before any work, if `path` cannot be written: an empty name, a folder that
    does not exist or takes no new file, or anything but a regular file (a device such as
    /dev/null, a FIFO, a socket, a directory), which an atomic rename would replace."""
    if str(path) == "":
        raise OutputError("an output file name is empty")
    if str(path) == "-":  # not a file named "-"; standard output carries the command's table
        raise OutputError("cannot write '-' here: standard output carries the table; give a file name "
                          "(zbsolve export -o - writes to standard output)")
    target = Path(path)
    final = destination(target)
    try:
        mode = os.stat(final).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OutputError(f"cannot write {target}: {error.strerror or error}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(f"cannot write {target}: it is {_kind(mode)}; zbsolve writes regular files only")
    folder = final.parent if str(final.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(f"cannot write {target}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"cannot write {target}: folder {folder} is not writable")
    try:  # what os.access cannot tell (/proc, a read-only mount): make and remove a file there
        handle, probe = tempfile.mkstemp(prefix=f".{final.name}.", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise OutputError(f"cannot write {target}: folder {folder} takes no new file: "
                          f"{error.strerror or error}") from None
    return target


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)  # links and hard links too
    return os.path.realpath(a) == os.path.realpath(b)


def check_separate(inputs: dict[str, str | None], outputs: dict[str, str | None]) -> None:
    """No output replaces an input (the user's profile or schedule file would be lost) or
    another output (the first written would be lost). Keys are the options' names."""
    seen: list[tuple[str, str]] = [(option, path) for option, path in inputs.items() if path]
    for option, path in outputs.items():
        if not path or path == "-":
            continue
        for other, earlier in seen:
            if _same_file(path, earlier):
                role = "output" if other in outputs else "input"
                raise OutputError(f"{option} {path} is the same file as {other} {earlier}, the {role} "
                                  f"it would replace: give {option} another file")
        seen.append((option, path))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, content: str | bytes) -> None:
    """Write via a temporary file in the same folder and a rename: never a partial file.
    Through a symbolic link, the file it points to is replaced and the link kept."""
    target = check_writable(path)
    final = destination(target)
    data = content.encode("utf-8") if isinstance(content, str) else content
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{final.name}.", dir=final.parent or ".")
        os.fchmod(handle, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, final)
    except OSError as error:
        raise OutputError(f"cannot write {target}: {error.strerror or error}") from None
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
