"""The clones of this machine, as the index and the active markers name them: finding one by
its id or a prefix, the active ones, and the newest first. What reads many clones reads them
here; one clone is read by `views`."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import datetime

from shadowclone import files
from shadowclone.config import Paths
from shadowclone.errors import BadInput, MalformedFile, NotFound
from shadowclone.node.ids import is_clone_id
from shadowclone.node.index import CloneIndex
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.target import Target
from shadowclone.node.views import CloneView, Listing, read_view

log = logging.getLogger("shadowclone.node.local")  # the node operations log under one name

DEFAULT_LIST_LIMIT = 30
MARKER_BYTES = 1024
"""An active marker holds its clone's target key: far less than this."""


class Clones:
    """The clones under `paths.clones_dir`, and which are active under `paths.active_dir`."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @property
    def index(self) -> CloneIndex:
        return CloneIndex(self.paths.clones_dir)

    def folder(self, clone_id: str) -> RunFolder:
        return RunFolder(self.paths.clones_dir / clone_id)

    def resolve(self, clone_id: str) -> RunFolder:
        """The run folder of an id, or of a unique prefix of one."""
        clone_id = clone_id.strip()
        exact = self.folder(clone_id)
        if is_clone_id(clone_id) and exact.exists():
            return exact
        if clone_id and "/" not in clone_id and "." not in clone_id:
            matches = [self.folder(i) for i in self.index.with_prefix(clone_id)]
            matches = [f for f in matches if f.exists()]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise BadInput(
                    f"clone id {clone_id!r} is ambiguous: it starts "
                    + ", ".join(f.id for f in matches[:5])
                )
        raise NotFound(f"no clone {clone_id!r}; `shadowclone list` shows the clones")

    def count_since(self, since: datetime) -> int:
        """Clones requested since `since`, counted by the time in their ids (the index).

        Ids carry whole seconds, so `since` is rounded down: a clone is counted for up to a
        second longer than 24 hours, never a moment less."""
        return self.index.since(since.replace(microsecond=0))

    def active(self, clean: bool = False, on: Target | None = None) -> list[CloneView]:
        """Active clones, from the active markers; `clean` (under start.lock) drops stale ones.
        `on`: only those on that issue or pull request, read from the markers (each names its
        target) without reading the other clones' folders: `start` stays fast with many
        queued."""
        try:
            files.check_plain_folder(self.paths.active_dir)
            ids = sorted(os.listdir(self.paths.active_dir))
        except FileNotFoundError:
            return []
        except OSError as error:
            raise MalformedFile(self.paths.active_dir, f"cannot list: {error.strerror}") from None
        active: list[CloneView] = []
        for clone_id in ids:
            if not is_clone_id(clone_id):
                continue
            if on is not None and not self._may_be_on(clone_id, on):
                continue
            folder = self.folder(clone_id)
            try:
                view = read_view(folder) if folder.exists() else None
            except MalformedFile as error:
                log.warning("%s", error)
                continue
            if view is not None and view.state.active:
                active.append(view)
            elif clean:
                try:
                    files.remove(self.paths.active_dir / clone_id)
                except MalformedFile as error:
                    log.warning("a stale active marker stays: %s", error)
        return active

    def _may_be_on(self, clone_id: str, target: Target) -> bool:
        """Whether the clone's active marker names `target` (or says nothing readable)."""
        try:
            named = files.read_bounded(self.paths.active_dir / clone_id, MARKER_BYTES)
        except (OSError, MalformedFile):
            return True
        text = named.decode("utf-8", "replace").strip()
        return not text or text.lower() == target.folded

    def list(self, include_all: bool = False, limit: int = DEFAULT_LIST_LIMIT) -> Listing:
        """Active clones and the most recent others (all of them with `include_all`)."""
        views: list[CloneView] = []
        problems: list[str] = []
        for item in self.views(include_all, limit):
            if isinstance(item, CloneView):
                views.append(item)
            else:
                problems.append(item)
        return Listing(views, problems)

    def views(
        self, include_all: bool = False, limit: int = DEFAULT_LIST_LIMIT
    ) -> Iterator[CloneView | str]:
        """`list`, one clone (or one problem, as a string) at a time, newest first: all of
        them can be shown without holding them all."""
        shown: set[str] = set()
        for clone_id in self.index.newest():
            if not include_all and len(shown) >= limit:
                break
            try:
                view = read_view(self.folder(clone_id))
            except FileNotFoundError:
                continue  # a start in progress, or a removed clone
            except MalformedFile as error:
                shown.add(clone_id)
                yield str(error)
                continue
            shown.add(clone_id)
            yield view
        if not include_all:
            yield from (view for view in self.active() if view.id not in shown)
