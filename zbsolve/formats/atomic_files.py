"""Atomic file writing shared by every command that writes output."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from zbsolve.errors import OutputError


def check_writable(path: str | os.PathLike) -> Path:
    """Fail early, before any work, if `path` cannot be written."""
    if str(path) == "-":  # not a file named "-"; standard output carries the command's table
        raise OutputError("cannot write '-' here: standard output carries the table; give a file name "
                          "(zbsolve export -o - writes to standard output)")
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise OutputError(f"cannot write {target}: it is a directory")
    if not folder.is_dir():
        raise OutputError(f"cannot write {target}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"cannot write {target}: folder {folder} is not writable")
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
    """Write via a temporary file in the same folder and a rename: never a partial file."""
    target = check_writable(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        os.fchmod(handle, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except OSError as error:
        raise OutputError(f"cannot write {target}: {error.strerror or error}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
