"""record.json, which serve alone writes: progress folded in, and the owner told of changes.

The rules of what a record becomes are pure functions in `records`; this is where they meet
the files and the notifiers, in one place, so no other part of serve writes a record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

import attrs

from shadowclone.config import Config, Paths
from shadowclone.node.schemas import ProgressKind, Record
from shadowclone.notify.dispatch import (
    Dispatcher,
    links_for,
    make_dispatcher,
    notable,
    notification,
)
from shadowclone.plugin.manager import Registry, load_registry
from shadowclone.plugin.types import NotifyEvent
from shadowclone.serve import records
from shadowclone.serve.clones import Clone, Writes

log = logging.getLogger(__name__)


class Recorder:
    """Writes records and tells the owner of the changes worth telling."""

    def __init__(
        self,
        config: Config,
        paths: Paths,
        *,
        clock: Callable[[], datetime],
        dispatcher: Dispatcher | None,
        registry: Registry | None,
        backoff_s: tuple[float, ...],
    ) -> None:
        self.clock = clock
        self.dispatcher = dispatcher
        """Where the owner is told of questions, pauses and endings; None: nowhere."""
        self.links = links_for(config, paths) if dispatcher is not None else None
        self.registry = registry
        """The plugins serve loaded: notifiers are built from it when `[notify]` changes."""
        self.backoff_s = backoff_s

    def write(self, clone: Clone, record: Record, launch_failed: bool = False) -> None:
        """Write the record if it changed (serve alone writes it), then tell the owner if
        the change is one to tell."""
        if attrs.evolve(record, updated_at=clone.record.updated_at) == clone.record:
            return
        before = clone.record
        clone.record = records.scrubbed(attrs.evolve(record, updated_at=self.clock()))
        clone.folder.write_record(clone.record)
        if self.dispatcher is None:
            return
        event = notable(before, clone.record)
        if event is NotifyEvent.FAILED and launch_failed:
            event = NotifyEvent.LAUNCH_FAILED
        if event is not None:
            self.dispatcher.put(notification(event, clone.request, clone.record, self.links))

    def renotify(self, config: Config, paths: Paths) -> None:
        """Notifiers built again from the new `[notify]`; the old ones finish on a thread."""
        old = self.dispatcher
        dispatcher = None
        if config.notify.use:
            registry = self.registry or load_registry(config.plugins.disabled)
            self.registry = registry
            dispatcher = make_dispatcher(config, paths, registry, self.backoff_s)
        self.dispatcher = dispatcher
        self.links = links_for(config, paths) if dispatcher is not None else None
        if old is not None:
            threading.Thread(target=old.close, name="notifiers closing", daemon=True).start()


class ProgressReader:
    """Folds the clone's new progress lines into its record, and notices what they say
    beyond the record: an overloaded provider, a final line (the clone is about to exit)."""

    def __init__(
        self,
        *,
        write: Writes,
        overloaded: Callable[[str], None],
        await_exit: Callable[[Clone], None],
    ) -> None:
        self.write = write
        self.overloaded = overloaded
        """Told the login whose provider said it is overloaded."""
        self.await_exit = await_exit
        """Watches closely a launched clone that wrote its final line."""

    def read(self, clone: Clone) -> None:
        from_start = clone.progress_offset == 0
        lines, _, clone.progress_offset = clone.folder.progress(clone.progress_offset)
        if not lines:
            return
        if clone.launched and any(line.kind is ProgressKind.OVERLOADED for line in lines):
            self.overloaded(clone.request.login)
        final = next((line for line in reversed(lines) if line.final), None)
        if final is not None and clone.final_at is None:
            clone.final_at = final.at
            if clone.launched:
                self.await_exit(clone)
        self.write(clone, records.fold_progress(clone.record, lines, clone.asked, from_start))
