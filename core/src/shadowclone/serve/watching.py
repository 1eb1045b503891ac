"""What wakes serve: filesystem events in the clones folder (watchfiles, on a thread of its own)
and the parts' own calls (an exit seen, a config changed), or else a timer every `tick_s`."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

from watchfiles import Change, watch

from shadowclone.node.ids import is_clone_id

log = logging.getLogger(__name__)

WATCHED_NAMES = frozenset({"request.json", "progress.jsonl", "inbox.jsonl", "stop.json"})
"""The run-folder files others write; serve's own writes (record, deliveries) wake nothing."""


class ChangeFeed:
    """Ids of clones to look at now, from the file watcher and from whoever wakes serve."""

    def __init__(self, root: Path, tick_s: float) -> None:
        self.root = root
        self.tick_s = tick_s
        self.events: queue.SimpleQueue[set[str]] = queue.SimpleQueue()
        self.stopping = threading.Event()
        """Set when serve stops (`changes` takes the caller's stop event)."""

    def wake(self, clone_ids: set[str]) -> None:
        self.events.put(clone_ids)

    def changes(self, stop_event: threading.Event) -> Iterator[set[str]]:
        """Ids of clones whose files changed or that exited, or an empty set at least every
        `tick_s`, until `stop_event` is set."""
        self.stopping = stop_event
        watcher = threading.Thread(
            target=self._watch, args=(stop_event,), name="watch clones", daemon=True
        )
        watcher.start()
        while not stop_event.is_set():
            try:
                touched = self.events.get(timeout=self.tick_s)
            except queue.Empty:
                touched = set()
            with contextlib.suppress(queue.Empty):
                while True:  # what else arrived meanwhile: one pass for all
                    touched |= self.events.get_nowait()
            yield touched
        watcher.join(timeout=5)

    def _watch(self, stop_event: threading.Event) -> None:
        def wanted(_change: Change, path: str) -> bool:
            return clone_of(Path(path)) is not None

        try:
            for changes in watch(
                self.root,
                watch_filter=wanted,
                # Quiet for a step, or 50 ms at most while clones keep writing: a new request
                # or an answer is not held back by busy neighbours.
                debounce=50,
                step=10,
                stop_event=stop_event,
                raise_interrupt=False,
            ):
                self.events.put({c for _, path in changes if (c := clone_of(Path(path)))})
        except (OSError, RuntimeError) as error:
            log.warning(
                "cannot watch %s (%s); reading it every %s s", self.root, error, self.tick_s
            )
        finally:
            self.events.put(set())  # serve stops (or reads on a timer): wake it now


def clone_of(path: Path) -> str | None:
    """The clone a changed path belongs to, if it is one serve reacts to."""
    parent = path.parent.name
    if parent == "active":
        return path.name if is_clone_id(path.name) else None
    if is_clone_id(parent) and path.name in WATCHED_NAMES:
        return parent
    return None
