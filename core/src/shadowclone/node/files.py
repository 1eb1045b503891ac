"""Atomic writes and whole-line appends: a crash never leaves half a file or half a line.

A reader may still meet a torn last line (a writer killed mid-append on a filesystem that does
not order appends); `read_lines` skips a final line without its newline, and the writer's next
append starts on a fresh line.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock

LOCK_TIMEOUT_S = 30.0


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot open a folder for fsync
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to a temp file beside `path`, fsync it, and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _fsync_dir(path.parent)


def lock_for(path: Path) -> filelock.FileLock:
    return filelock.FileLock(path.with_name(path.name + ".lock"), timeout=LOCK_TIMEOUT_S)


def append_line(path: Path, line: bytes, locked: bool = False) -> None:
    """Append one whole line under the file's lock (`locked`: the caller holds it), and fsync."""
    if b"\n" in line:
        raise ValueError("a line must not contain a newline")
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext() if locked else lock_for(path), open(path, "ab+") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")  # end a torn line left by a crashed writer
        handle.write(line + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_lines(path: Path, start: int = 0) -> tuple[list[bytes], int]:
    """Complete lines from byte offset `start`, and the offset just after the last one."""
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return [], start
    end = data.rfind(b"\n")
    if end < 0:
        return [], start
    return data[:end].split(b"\n"), start + end + 1


def iter_lines(path: Path) -> Iterator[bytes]:
    lines, _ = read_lines(path)
    yield from lines
