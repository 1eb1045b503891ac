"""Removing ended clones: `rm ID`, `prune --older-than 30d`, and serve's `[retention]`.

A clone goes only once it has ended and serve is done with it: its record says it ended and
its active marker is gone (serve removes the marker after the ended record, and never writes to
an ended clone again). The run folder is first renamed to a hidden name in the clones folder,
which no reader takes for a clone, so it vanishes at once and whole: two removals of one clone
cannot both proceed, and `get`, `list` and serve see the clone or nothing. Then the hidden
folder is deleted without following a link (the workspace inside is the engine's, links and
all). Whatever could not be deleted stays hidden and is tried again by the next prune. The
clones index keeps the id: the daily limit still counts a removed clone.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import attrs

from shadowclone import files
from shadowclone.errors import BadInput, MalformedFile, Refused
from shadowclone.node.ids import is_clone_id
from shadowclone.node.index import CloneIndex
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, State
from shadowclone.node.stopping import STOP_LOCK_TIMEOUT_S

log = logging.getLogger("shadowclone.node.local")  # the node operations log under one name

TRASH_PREFIX = ".removing-"


@attrs.frozen
class Removed:
    id: str
    state: str
    ended_at: datetime | None
    bytes: int
    """What the run folder held, its workspace included."""
    left: str = ""
    """What could not be deleted (it stays hidden, and the next prune tries again)."""


def tree_size(path: Path) -> int:
    """Bytes under `path`, links counted as themselves, never followed."""
    total = 0
    for root, dirs, names in os.walk(path, followlinks=False):
        for name in (*dirs, *names):
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def delete_tree(path: Path) -> str:
    """Delete a hidden folder without following links; "" or what was left and why."""
    problems: list[str] = []

    def on_error(failed: str, error: BaseException) -> None:
        problems.append(f"{failed}: {getattr(error, 'strerror', None) or error}")

    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux's rmtree does
        for root, dirs, _names in os.walk(path, followlinks=False):
            for name in dirs:
                link = os.path.join(root, name)
                if os.path.islink(link):
                    os.unlink(link)  # removed before rmtree could step through it
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _f, failed, error: on_error(failed, error))
    else:  # 3.11 has only onerror
        shutil.rmtree(path, onerror=lambda _f, failed, info: on_error(failed, info[1]))
    if not problems:
        return ""
    return f"{len(problems)} not deleted, first {problems[0]}"


class Retention:
    """Removes the ended clones of one clones folder."""

    def __init__(self, clones_dir: Path, active_dir: Path) -> None:
        self.clones_dir = clones_dir
        self.active_dir = active_dir

    def removable(self, folder: RunFolder) -> tuple[str, datetime | None]:
        """The clone's ended state and when it ended, or `Refused` saying why it stays."""
        if stat.S_ISLNK(os.lstat(folder.path).st_mode):
            raise MalformedFile(folder.path, "a symbolic link, which is never followed here")
        record = folder.record()
        never_started = self._stopped_in_queue(folder, record)
        if never_started is not None:
            return "stopped", never_started
        if record is None or record.state.active:
            state = record.state if record is not None else "queued"
            raise Refused(
                f"clone {folder.id} is {state}; only an ended clone is removed "
                f"(`shadowclone stop {folder.id}` first)"
            )
        if os.path.lexists(self.active_dir / folder.id):
            raise Refused(
                f"clone {folder.id} has ended but serve has not finished with it yet; "
                "try again once serve has run"
            )
        return record.state, record.ended_at or record.updated_at

    @staticmethod
    def _stopped_in_queue(folder: RunFolder, record: Record | None) -> datetime | None:
        """When a queued clone was stopped, if it was: with a stop marker and no launch begun
        it never starts (the marker is written under the stop lock serve holds from its look
        at it until the clone runs), so it is ended, though serve may not have said so yet."""
        record = folder.record()
        if record is not None and (record.state is not State.QUEUED or record.launching_at):
            return None
        stop = folder.stop_marker()
        return None if stop is None else stop.at

    def remove(self, folder: RunFolder) -> Removed:
        hidden = self.clones_dir / f"{TRASH_PREFIX}{folder.id}-{secrets.token_hex(4)}"
        # Under the clone's stop lock: serve looks at a queued clone's marker, and launches it,
        # only while it holds that lock; a removal that came first raises `FolderRemoved`.
        with folder.stop_lock(STOP_LOCK_TIMEOUT_S):
            state, ended = self.removable(folder)
            os.rename(folder.path, hidden)
            if state == "stopped" and os.path.lexists(self.active_dir / folder.id):
                files.remove(self.active_dir / folder.id)  # serve never took it up
        size = tree_size(hidden)
        return Removed(folder.id, str(state), ended, size, delete_tree(hidden))

    def prune(self, index: CloneIndex, before: datetime, dry_run: bool = False) -> list[Removed]:
        """Remove every clone that ended before `before`, and finish what an earlier removal
        left; `dry_run`: only say which clones would go. A clone that cannot go is logged and
        stays: one bad folder does not stop the prune."""
        gone: list[Removed] = []
        for folder in self.ended_before(index, before):
            if dry_run:
                state, ended = self.removable(folder)
                gone.append(Removed(folder.id, str(state), ended, tree_size(folder.path)))
                continue
            try:
                gone.append(self.remove(folder))
            except (BadInput, Refused, MalformedFile) as error:
                log.warning("clone %s stays: %s", folder.id, error)
        if not dry_run:
            for hidden in self.leftovers():
                delete_tree(hidden)
        return gone

    def ended_before(self, index: CloneIndex, moment: datetime) -> Iterator[RunFolder]:
        """Run folders of ended clones that ended before `moment`, oldest id first."""
        for clone_id in reversed(list(index.newest())):
            folder = RunFolder(self.clones_dir / clone_id)
            if not is_clone_id(clone_id) or not folder.exists():
                continue
            try:
                _, ended = self.removable(folder)
            except (Refused, MalformedFile, FileNotFoundError):
                continue
            if ended is not None and ended < moment:
                yield folder

    def leftovers(self) -> list[Path]:
        """Hidden folders an earlier removal could not finish."""
        try:
            return sorted(
                Path(entry.path)
                for entry in os.scandir(self.clones_dir)
                if entry.name.startswith(TRASH_PREFIX) and entry.is_dir(follow_symlinks=False)
            )
        except FileNotFoundError:
            return []
