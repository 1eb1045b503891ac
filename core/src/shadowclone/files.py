"""Atomic writes, whole-line appends and bounded reads of files others may write.

A crash never leaves half a file or half a line. A reader may still meet a torn last line (a
writer killed mid-append on a filesystem that does not order appends); `read_lines` skips a
final line without its newline, and the writer's next append starts on a fresh line.

The clones folder is a trust boundary: a run folder's files are written by the clone and by
the owner's commands, so any of them may be a link, a folder, a FIFO or something huge. Every
file here is opened relative to its folder, and neither is followed if it is a symbolic link
(`O_NOFOLLOW`), so nothing is read or written outside the home through a link; a FIFO is
opened without blocking and refused, as is anything but a plain file; reads are bounded. Each
of these ends in `MalformedFile` naming the file; a missing file stays `FileNotFoundError`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from shadowclone.errors import MalformedFile, Refused

LOCK_TIMEOUT_S = 30.0
MAX_DOCUMENT_BYTES = 8 * 1024 * 1024
"""The largest JSON document (a request, a record, a marker) a reader takes."""
MAX_READ_BYTES = 64 * 1024 * 1024
"""The most of a lines file one read takes; the next read goes on from where it stopped."""

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_WHY = {
    errno.ELOOP: "a symbolic link, which is never followed here",
    errno.EISDIR: "a folder where a file should be",
    errno.ENOTDIR: "its folder is not a folder",
    errno.ENXIO: "not a plain file (a FIFO or a socket)",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def _why(error: OSError) -> str:
    return _WHY.get(error.errno or 0, error.strerror or str(error))


def _open_folder(folder: Path, plain: bool) -> int:
    """A descriptor of `folder`; `plain`: refused if it is a link (or not a folder)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if plain else 0)
    try:
        return os.open(folder, flags)
    except FileNotFoundError:
        raise
    except OSError as error:
        detail = _why(error)
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            detail = "not a plain folder (a link, or a file where a folder should be)"
        raise MalformedFile(folder, detail) from None


def open_plain(path: Path, flags: int, mode: int = 0o644, plain_folder: bool = True) -> int:
    """A descriptor of the plain file `path`, neither it nor (with `plain_folder`) its folder
    followed if a link, never blocking on a FIFO. Raises `MalformedFile` for anything else."""
    folder = _open_folder(path.parent, plain_folder)
    try:
        descriptor = os.open(path.name, flags | _NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise MalformedFile(path, f"cannot open: {_why(error)}") from None
    finally:
        os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise MalformedFile(path, "not a plain file")
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def check_plain_folder(folder: Path) -> None:
    """Raise `MalformedFile` unless `folder` is a folder and not a link (missing: FileNotFound)."""
    os.close(_open_folder(folder, plain=True))


def read_bounded(path: Path, limit: int = MAX_DOCUMENT_BYTES, plain_folder: bool = True) -> bytes:
    """The whole of a plain file of at most `limit` bytes."""
    descriptor = open_plain(path, os.O_RDONLY, plain_folder=plain_folder)
    try:
        size = os.fstat(descriptor).st_size
        if size > limit:
            raise MalformedFile(path, f"{size} bytes; at most {limit} are read")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise MalformedFile(path, f"cannot read: {_why(error)}") from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise MalformedFile(path, f"more than {limit} bytes; at most {limit} are read")
    return data


def write_atomic(path: Path, data: bytes, mode: int = 0o644, plain_folder: bool = False) -> None:
    """Write `data` to a temp file beside `path`, fsync it, and rename it into place.

    `plain_folder`: `path`'s folder must not be a link (a run folder, the active markers);
    the owner's own folders (the config's, the clones folder itself) may be."""
    make_folder(path.parent)
    folder = _open_folder(path.parent, plain_folder)
    temp = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        try:
            descriptor = os.open(
                temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=folder
            )
            try:
                _write_all(descriptor, data)
                os.fchmod(descriptor, mode)
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.replace(temp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            if isinstance(error, OSError) and not isinstance(error, FileNotFoundError):
                raise MalformedFile(path, f"cannot write: {_why(error)}") from None
            raise
        with contextlib.suppress(OSError):  # some filesystems cannot fsync a folder
            os.fsync(folder)
    finally:
        os.close(folder)


_PART = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._-]+")


def relative_parts(relative: str) -> list[str]:
    """The parts of a `/`-separated path inside a folder, each of letters, digits, `.`, `_`
    and `-` and none `.` or `..`; ValueError for any other (`..`, absolute, empty)."""
    parts = relative.split("/")
    if not all(_PART.fullmatch(part) for part in parts):
        raise ValueError(f"{relative!r} is not a plain path inside a folder")
    return parts


def _folder_beneath(root: Path, parts: list[str], make: bool) -> int:
    """A descriptor of the folder `root/parts...`, no part followed if it is a link (a
    folder another user can change may hold any); `make`: missing parts are made."""
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=descriptor)
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _beneath(root: Path, relative: str, flags: int, make: bool) -> int:
    """A descriptor of the plain file `relative` in `root` (see `_folder_beneath`)."""
    *folders, name = relative_parts(relative)
    try:
        folder = _folder_beneath(root, folders, make)
        try:
            descriptor = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=folder)
        finally:
            os.close(folder)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise MalformedFile(root / relative, f"cannot open: {_why(error)}") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise MalformedFile(root / relative, "not a plain file")
    os.set_blocking(descriptor, True)
    return descriptor


def read_beneath(root: Path, relative: str, limit: int) -> bytes:
    """The plain file `relative` in `root`, of at most `limit` bytes, read without following a
    link on the way: for files in a folder someone else writes (an engine's state folder)."""
    descriptor = _beneath(root, relative, os.O_RDONLY, make=False)
    try:
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise MalformedFile(root / relative, f"cannot read: {_why(error)}") from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise MalformedFile(root / relative, f"more than {limit} bytes; at most {limit} are read")
    return data


def write_beneath(root: Path, relative: str, data: bytes) -> None:
    """Write the file `relative` in `root`, its missing folders made, without following a link
    on the way (`read_beneath`)."""
    descriptor = _beneath(root, relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make=True)
    try:
        _write_all(descriptor, data)
    except OSError as error:
        raise MalformedFile(root / relative, f"cannot write: {_why(error)}") from None
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def make_folder(folder: Path) -> None:
    """`mkdir -p`, with a file (or a dangling link) in the way as one line naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise MalformedFile(folder, f"cannot make this folder: {_why(error)}") from None
    if not folder.is_dir():
        raise MalformedFile(folder, "not a folder")


def remove(path: Path) -> None:
    """Remove a marker file if it is there; a folder in its place is refused, never emptied."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise MalformedFile(path, f"cannot remove: {_why(error)}") from None


class LockBusy(Refused):
    """Another process holds the lock for longer than the caller waits."""


class FileLock:
    """An exclusive `flock` on a plain lock file, opened without following a link.

    The same kind of lock as `filelock`'s (so processes of either kind exclude each other),
    but a lock file that is a link, a folder or a FIFO is refused rather than followed."""

    def __init__(
        self,
        path: Path,
        timeout: float = LOCK_TIMEOUT_S,
        plain_folder: bool = True,
        mode: int = 0o644,
        make_parent: bool = True,
    ) -> None:
        self.path = path
        self.timeout = timeout
        self.plain_folder = plain_folder
        self.mode = mode
        """The lock file's mode when it is made: 0o600 keeps other users (a clone's engine)
        from opening it, and so from ever holding the lock."""
        self.make_parent = make_parent
        """False: a missing folder raises `FileNotFoundError` rather than being made again
        (a lock inside a folder another process may remove)."""
        self._descriptor: int | None = None

    def __enter__(self) -> FileLock:
        if self.make_parent:
            make_folder(self.path.parent)
        try:
            descriptor = open_plain(
                self.path, os.O_RDWR | os.O_CREAT, self.mode, plain_folder=self.plain_folder
            )
        except MalformedFile:
            if not os.path.lexists(self.path):
                raise
            # A lock file another user made (serve run as root, the clone as its own user):
            # a read-only descriptor takes the same flock; a link or a folder is still refused.
            descriptor = open_plain(self.path, os.O_RDONLY, plain_folder=self.plain_folder)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(descriptor)
                    raise LockBusy(
                        f"{self.path}: held by another process for over {self.timeout:.0f} s"
                    ) from None
                time.sleep(0.01)
            except OSError as error:
                os.close(descriptor)
                raise MalformedFile(self.path, f"cannot lock: {_why(error)}") from None
        self._descriptor = descriptor
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)  # closing the only descriptor releases the flock


def lock_for(path: Path) -> FileLock:
    return FileLock(path.with_name(path.name + ".lock"))


def append_line(path: Path, line: bytes, locked: bool = False) -> None:
    """Append one whole line under the file's lock (`locked`: the caller holds it), and fsync."""
    if b"\n" in line:
        raise ValueError("a line must not contain a newline")
    make_folder(path.parent)
    with contextlib.nullcontext() if locked else lock_for(path):
        descriptor = open_plain(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            end = os.lseek(descriptor, 0, os.SEEK_END)
            torn = end > 0 and os.pread(descriptor, 1, end - 1) != b"\n"
            # End a torn line left by a crashed writer.
            _write_all(descriptor, (b"\n" if torn else b"") + line + b"\n")
            os.fsync(descriptor)
        except OSError as error:
            raise MalformedFile(path, f"cannot append: {_why(error)}") from None
        finally:
            os.close(descriptor)


def read_lines(path: Path, start: int = 0) -> tuple[list[bytes], int]:
    """Complete lines from byte offset `start` (at most `MAX_READ_BYTES` of them), and the
    offset just after the last one."""
    try:
        known = os.lstat(path)
    except FileNotFoundError:
        return [], start
    except OSError as error:
        raise MalformedFile(path, f"cannot read: {_why(error)}") from None
    if stat.S_ISREG(known.st_mode) and known.st_size == start:
        # Nothing new. A look at the size opens nothing: an open is an event for every
        # watcher of the folder (serve's, with a hundred clones polling their files).
        return [], start
    try:
        descriptor = open_plain(path, os.O_RDONLY)
    except FileNotFoundError:
        return [], start
    try:
        data = _read_from(descriptor, start, MAX_READ_BYTES)
    except OSError as error:
        raise MalformedFile(path, f"cannot read: {_why(error)}") from None
    finally:
        os.close(descriptor)
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) >= MAX_READ_BYTES:  # one line longer than a whole read: step over it
            return [data], start + len(data)
        return [], start
    return data[:end].split(b"\n"), start + end + 1


def tail_offset(path: Path, limit: int | None = None) -> int:
    """Where the last `limit` bytes of `path`'s whole lines begin: 0 for a file no larger, so
    a reader of a huge log sees its latest lines, not its first (`limit`: one read's most)."""
    limit = MAX_READ_BYTES if limit is None else limit
    try:
        descriptor = open_plain(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(descriptor).st_size
        if size <= limit:
            return 0
        start = offset = size - limit
        if os.pread(descriptor, 1, start - 1) == b"\n":
            return start
        while offset < size:  # the first line that begins inside the tail
            piece = os.pread(descriptor, 1024 * 1024, offset)
            if not piece:
                break
            newline = piece.find(b"\n")
            if newline >= 0:
                return offset + newline + 1
            offset += len(piece)
        return offset
    except OSError as error:
        raise MalformedFile(path, f"cannot read: {_why(error)}") from None
    finally:
        os.close(descriptor)


def _read_from(descriptor: int, start: int, limit: int) -> bytes:
    pieces: list[bytes] = []
    size = 0
    while size < limit:
        piece = os.pread(descriptor, min(limit - size, 1024 * 1024), start + size)
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


def iter_lines(path: Path) -> Iterator[bytes]:
    lines, _ = read_lines(path)
    yield from lines
