"""The clones' index: every clone id, in the order the clones were started.

`start`, `list` and `get` by id prefix must not slow down as run folders pile up, and a
directory listing is proportional to them all. So `start` appends each new id, under
start.lock, to `clones/index`: fixed-width records (an id and a newline), whose time parts
never decrease (a new id takes the later of the clock and the last id's time). Reading the
newest N clones is then a seek from the end, the clones of the last day a read back to the
day's start, and the ids with a prefix a binary search on their time part.

An index that is missing (run folders of an earlier version) is rebuilt from the folder names
by the next `start`; until then readers fall back to listing the folder.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from shadowclone import files
from shadowclone.node.ids import ID_TIME_FORMAT, clone_ids, id_time, is_clone_id

INDEX_FILE = "index"
ID_LENGTH = 18
RECORD = ID_LENGTH + 1
TIME_LENGTH = 13
"""`YYMMDD-HHMMSS`: the part of an id that orders the index."""
READ_BLOCK = 1024 * RECORD


class CloneIndex:
    """The ids of `clones_dir`'s clones, oldest first (see the module's docstring)."""

    def __init__(self, clones_dir: Path) -> None:
        self.clones_dir = clones_dir
        self.path = clones_dir / INDEX_FILE

    # ------------------------------------------------------------------ writing (start.lock)

    def ensure(self) -> None:
        """Build the index from the folder names if there is none. Under start.lock."""
        if self.path.exists():
            return
        names = sorted(clone_ids(self.clones_dir))
        files.write_atomic(self.path, "".join(f"{name}\n" for name in names).encode())

    def last_time(self) -> datetime | None:
        """The time of the newest id. Under start.lock."""
        newest = next(self.newest(), None)
        return id_time(newest) if newest else None

    def append(self, clone_id: str) -> None:
        """Add a new clone's id. Under start.lock, so this process is the only writer: a record
        torn by a crash is cut off first (its clone never got further than its folder)."""
        if not is_clone_id(clone_id):
            raise ValueError(f"{clone_id!r} is not a clone id")
        descriptor = files.open_plain(self.path, os.O_WRONLY | os.O_CREAT, plain_folder=False)
        try:
            end = os.fstat(descriptor).st_size
            whole = end - end % RECORD
            if whole != end:
                os.ftruncate(descriptor, whole)
            os.pwrite(descriptor, f"{clone_id}\n".encode(), whole)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    # ------------------------------------------------------------------ reading

    def _records(self) -> _Records | None:
        try:
            return _Records(self.path)
        except FileNotFoundError:
            return None

    def newest(self) -> Iterator[str]:
        """Every id, newest first, read from the end in blocks."""
        records = self._records()
        if records is None:
            yield from clone_ids(self.clones_dir)
            return
        with records:
            yield from records.backwards()

    def since(self, moment: datetime) -> int:
        """How many clones were started at `moment` or later (by the time in their ids)."""
        records = self._records()
        if records is None:
            count = 0
            for clone_id in self.newest():
                started = id_time(clone_id)
                if started is not None and started < moment:
                    break
                count += started is not None
            return count
        key = moment.astimezone(UTC).strftime(ID_TIME_FORMAT)
        with records:
            return len(records) - bisect.bisect_left(
                records, key, key=lambda item: item[:TIME_LENGTH]
            )

    def with_prefix(self, prefix: str) -> list[str]:
        """The ids that start with `prefix`, oldest first."""
        records = self._records()
        if records is None:
            return sorted(name for name in clone_ids(self.clones_dir) if name.startswith(prefix))
        with records:
            key = prefix[:TIME_LENGTH]
            low = bisect.bisect_left(records, key, key=lambda item: item[: len(key)])
            found = []
            for index in range(low, len(records)):
                clone_id = records[index]
                if clone_id[: len(key)] != key:
                    break
                if clone_id.startswith(prefix) and is_clone_id(clone_id):
                    found.append(clone_id)
            return found


class _Records(Sequence[str]):
    """The index file as a sequence of ids, read record by record (for the binary search)."""

    def __init__(self, path: Path) -> None:
        self._descriptor = files.open_plain(path, os.O_RDONLY, plain_folder=False)
        self._count = os.fstat(self._descriptor).st_size // RECORD

    def __enter__(self) -> _Records:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            os.close(self._descriptor)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if not 0 <= index < self._count:
            raise IndexError(index)
        raw = os.pread(self._descriptor, ID_LENGTH, index * RECORD)
        return raw.decode("ascii", errors="replace")

    def backwards(self) -> Iterator[str]:
        end = self._count * RECORD
        while end > 0:
            start = max(0, end - READ_BLOCK)
            block = os.pread(self._descriptor, end - start, start)
            for offset in range(len(block) - RECORD, -1, -RECORD):
                clone_id = block[offset : offset + ID_LENGTH].decode("ascii", errors="replace")
                if is_clone_id(clone_id):
                    yield clone_id
            end = start
