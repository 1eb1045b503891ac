"""serve.lock: one serve per machine, and which process that is."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import attrs

from shadowclone.config import Paths
from shadowclone.errors import MalformedFile, Refused
from shadowclone.files import (
    FileLock,
    LockBusy,
    make_folder,
    open_plain,
    read_bounded,
    write_atomic,
)

PID_WAIT_S = 2.0
"""How long a refused serve waits for the holder to write its pid (it does so right after
taking the lock)."""
LOCK_WAIT_S = 0.5
"""How long a starting serve tries for the lock: `running` holds it for an instant to look."""


def pid_file(paths: Paths) -> Path:
    return paths.serve_lock.with_name("serve.pid")


def holder(paths: Paths) -> int | None:
    """The pid written by the serve that holds the lock, if it has written it."""
    try:
        text = read_bounded(pid_file(paths), 64, plain_folder=False).decode("ascii").strip()
    except (FileNotFoundError, MalformedFile, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


@attrs.frozen
class RunningServe:
    pid: int | None
    """None while the serve that holds the lock has not yet written its pid."""
    since: datetime | None


def running(paths: Paths) -> RunningServe | None:
    """The serve that holds serve.lock, or None when none does.

    A shared lock taken and dropped at once tells: it fails only while a serve holds the lock.
    The pid file alone cannot, as a serve killed outright leaves it behind. A serve starting at
    that instant waits for the lock (`LOCK_WAIT_S`) rather than being refused."""
    try:
        descriptor = open_plain(paths.serve_lock, os.O_RDONLY, plain_folder=False)
    except (FileNotFoundError, MalformedFile):
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
        else:
            return None
    finally:
        os.close(descriptor)
    pid = holder(paths)
    since = None
    with contextlib.suppress(OSError):
        since = datetime.fromtimestamp(pid_file(paths).lstat().st_mtime, UTC)
    return RunningServe(pid, since if pid is not None else None)


class ServeLock:
    """Held for the life of `serve_clones`; a second serve is refused, naming the holder."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._lock = FileLock(paths.serve_lock, timeout=LOCK_WAIT_S, plain_folder=False)

    def __enter__(self) -> ServeLock:
        make_folder(self.paths.clones_dir)
        try:
            self._lock.__enter__()
        except LockBusy:
            raise Refused(self._refusal()) from None
        write_atomic(pid_file(self.paths), f"{os.getpid()}\n".encode())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if holder(self.paths) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                pid_file(self.paths).unlink()
        self._lock.__exit__(None, None, None)

    def _refusal(self) -> str:
        deadline = time.monotonic() + PID_WAIT_S
        pid = holder(self.paths)
        while pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
            pid = holder(self.paths)
        who = f"process {pid}" if pid is not None else "another process (pid not written)"
        return f"serve is already running on this machine: {who} holds {self.paths.serve_lock}"
