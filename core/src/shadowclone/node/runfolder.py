"""A clone's run folder: its request, record, inbox, progress lines and stop marker."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import attrs

from shadowclone import contract, files
from shadowclone.errors import MalformedFile, NotFound
from shadowclone.node import schemas
from shadowclone.node.ids import (
    clone_ids,
)
from shadowclone.node.schemas import (
    Handoff,
    InboxLine,
    ProgressLine,
    Record,
    Request,
    ResumeMarker,
    StopMarker,
)

log = logging.getLogger(__name__)


class FolderRemoved(NotFound):
    """The run folder was removed (renamed away by `rm` or `prune`) before its lock was held."""


T = TypeVar("T")

MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line a JSON-lines reader takes (a final line with a long report fits)."""


def read_json_lines(path: Path, kind: type[T], start: int = 0) -> tuple[list[T], list[str], int]:
    """The well-formed lines from `start`, the problems with the others (each naming the file),
    and where the next read starts. A file that is not a plain file raises `MalformedFile`."""
    raw, end = files.read_lines(path, start)
    items: list[T] = []
    problems: list[str] = []
    for number, line in enumerate(raw, 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            problems.append(f"{path} (line at byte {start}+{number}): longer than {MAX_LINE_BYTES}")
            continue
        try:
            items.append(schemas.loads(line, kind, path))
        except MalformedFile as error:
            problems.append(f"{path} (line at byte {start}+{number}): {error.detail}")
    for problem in problems:
        log.warning("skipping a malformed line: %s", problem)
    return items, problems, end


@attrs.frozen
class RunFolder:
    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def request_file(self) -> Path:
        return self.path / contract.REQUEST_FILE

    @property
    def record_file(self) -> Path:
        return self.path / "record.json"

    @property
    def inbox_file(self) -> Path:
        return self.path / "inbox.jsonl"

    @property
    def progress_file(self) -> Path:
        return self.path / "progress.jsonl"

    @property
    def deliveries_file(self) -> Path:
        """Inbox lines serve has handed to the running clone, each once; serve alone
        appends here and the clone only reads."""
        return self.path / "deliveries.jsonl"

    @property
    def handoff_file(self) -> Path:
        return self.path / contract.HANDOFF_FILE

    @property
    def carry_file(self) -> Path:
        """What a clone carries from one phase of its work to the next (written inside it)."""
        return self.path / "carry.json"

    @property
    def stop_file(self) -> Path:
        return self.path / "stop.json"

    @property
    def inbox_closed_file(self) -> Path:
        """serve's note that a clone whose run folder travels closed its inbox (written under
        the inbox lock, as `send` checks it); a clone on this machine says so in its progress."""
        return self.path / "inbox-closed.json"

    @contextlib.contextmanager
    def stop_lock(self, timeout: float) -> Iterator[None]:
        """The exclusion between a stop and a launch: `stop` writes the stop marker under it,
        and serve reads the marker, marks the clone launching and calls its launcher under it,
        so a stop either comes wholly before a launch (the clone never starts) or wholly after
        (it is running, and is stopped). Private to the owner (mode 0600): a clone's engine,
        which can read the run folder, cannot open it to hold it.

        A removal renames the folder away under this lock; one who comes after, or waited for
        the lock meanwhile, gets `FolderRemoved` and never makes the folder again."""
        removed = FolderRemoved(f"no clone {self.id!r}; it was removed")
        lock = files.FileLock(
            self.path / "stop.json.lock", timeout=timeout, mode=0o600, make_parent=False
        )
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(lock)
            except FileNotFoundError:
                raise removed from None
            if not self.exists():
                raise removed
            yield

    def exists(self) -> bool:
        """A request is there (whatever it holds: reading it says what is wrong), or the
        run folder is something else than a folder (a link, a file: reading refuses it)."""
        try:
            if not stat.S_ISDIR(os.lstat(self.path).st_mode):
                return True
            os.lstat(self.request_file)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return True  # there, but unreadable: reading it reports why
        return True

    def request(self) -> Request:
        return schemas.read(self.request_file, Request)

    def record(self) -> Record | None:
        try:
            return schemas.read(self.record_file, Record)
        except FileNotFoundError:
            return None

    @property
    def saved_session_dir(self) -> Path:
        """The engine's session, kept for the next clone on its pull request (node/sessions.py)."""
        return self.path / "session"

    @property
    def given_session_dir(self) -> Path:
        """An earlier clone's session, which serve gave this clone to go on with."""
        return self.path / "session-given"

    @property
    def resume_file(self) -> Path:
        return self.path / "resume.json"

    def resume_marker(self) -> ResumeMarker | None:
        try:
            return schemas.read(self.resume_file, ResumeMarker)
        except FileNotFoundError:
            return None
        except MalformedFile:
            return ResumeMarker()  # its presence is what counts: the owner said resume

    def write_resume(self, marker: ResumeMarker) -> None:
        schemas.write(self.resume_file, marker)

    def stop_marker(self) -> StopMarker | None:
        try:
            return schemas.read(self.stop_file, StopMarker)
        except FileNotFoundError:
            return None
        except MalformedFile:
            return StopMarker()  # a stop marker's presence is what counts

    def progress(self, start: int = 0) -> tuple[list[ProgressLine], list[str], int]:
        return read_json_lines(self.progress_file, ProgressLine, start)

    def inbox(self, start: int = 0) -> tuple[list[InboxLine], list[str], int]:
        return read_json_lines(self.inbox_file, InboxLine, start)

    def handoff(self) -> Handoff | None:
        try:
            return schemas.read(self.handoff_file, Handoff)
        except FileNotFoundError:
            return None

    def write_handoff(self, handoff: Handoff) -> None:
        schemas.write(self.handoff_file, handoff)

    def write_request(self, request: Request) -> None:
        schemas.write(self.request_file, request)

    def write_record(self, record: Record) -> None:
        """Serve alone calls this."""
        schemas.write(self.record_file, record)

    def write_stop(self, marker: StopMarker) -> None:
        schemas.write(self.stop_file, marker)

    def append_inbox(self, line: InboxLine) -> None:
        files.append_line(self.inbox_file, schemas.dumps(line))

    def deliveries(self, start: int = 0) -> tuple[list[InboxLine], list[str], int]:
        return read_json_lines(self.deliveries_file, InboxLine, start)

    def append_progress(self, line: ProgressLine) -> None:
        files.append_line(self.progress_file, schemas.dumps(line))


def run_folders(clones_dir: Path) -> Iterator[RunFolder]:
    """Every run folder, newest first, by name alone (no file is read)."""
    for name in clone_ids(clones_dir):
        yield RunFolder(clones_dir / name)
