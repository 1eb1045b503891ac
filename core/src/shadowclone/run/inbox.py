"""What reaches the clone from the owner: delivered inbox lines and the stop marker.

Inside the clone only `deliveries.jsonl` is read (serve copies each inbox line there once).
Files are followed with filesystem events (watchfiles) and, because events may not cross
every mount (a bind mount from another kernel), with a slow poll as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Collection
from pathlib import Path
from typing import Self

from watchfiles import Change, awatch

from shadowclone.closing import AsyncClosing
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import InboxKind, InboxLine, StopMarker

log = logging.getLogger(__name__)

POLL_S = 2.0
"""How often the files are read even when no filesystem event came."""

_WATCHER_EXIT_S = 5.0


class FileWatch(AsyncClosing):
    """Wakes its user when one of `names` in `folder` changes, or after `poll_s` at most.

    The watcher runs in a background task with its own stop event: stopping it through the
    event ends its thread within milliseconds, where cancelling it would wait for the thread.
    """

    def __init__(self, folder: Path, names: Collection[str], poll_s: float = POLL_S) -> None:
        self.folder = folder
        self.names = frozenset(names)
        self.poll_s = poll_s
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._watch(), name=f"watch {self.folder}")
        return self

    async def close(self) -> None:
        """Stop the watcher, cancelling it only if its thread does not end in time."""
        self._stop.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), _WATCHER_EXIT_S)
        except TimeoutError:
            log.warning("the watcher of %s did not stop in time; cancelling it", self.folder)
            self._task.cancel()

    async def wait(self) -> None:
        """Return after a change to a watched file, or after `poll_s`; callers read the files
        right after, so a change that lands while they read wakes the next wait."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), self.poll_s)
        self._changed.clear()

    def _wanted(self, _change: Change, path: str) -> bool:
        return Path(path).name in self.names

    async def _watch(self) -> None:
        try:
            async for _changes in awatch(
                self.folder,
                watch_filter=self._wanted,
                # Quiet for one step, or the debounce at most while the folder stays busy
                # (the clone's own progress lines change it too): an answer waits no longer.
                debounce=40,
                step=10,
                stop_event=self._stop,
                recursive=False,
            ):
                self._changed.set()
        except Exception as error:  # noqa: BLE001 - the poll still runs; say why events stopped
            log.warning(
                "cannot watch %s (%s); reading it every %s s", self.folder, error, self.poll_s
            )


async def delivered(
    folder: RunFolder,
    kinds: Collection[InboxKind] | None = None,
    poll_s: float = POLL_S,
    taken: Collection[str] = (),
) -> AsyncGenerator[InboxLine, None]:
    """Each inbox line serve has delivered to this clone, once, in order, as it arrives;
    `kinds` keeps only messages or only answers, and the ids in `taken` (what an earlier
    engine session took) are passed over. Runs until the caller closes it
    (`contextlib.aclosing`), which also stops its watcher."""
    wanted = frozenset(kinds) if kinds is not None else frozenset(InboxKind)
    offset = 0
    seen: set[str] = set()
    passed_over = frozenset(taken)
    async with FileWatch(folder.path, {folder.deliveries_file.name}, poll_s) as watch:
        while True:
            lines, _, offset = folder.deliveries(offset)
            for line in lines:
                if line.id in seen:
                    log.warning("inbox line %s was delivered twice; using it once", line.id)
                    continue
                seen.add(line.id)
                if line.kind in wanted and line.id not in passed_over:
                    yield line
            await watch.wait()


async def wait_for_stop(folder: RunFolder, poll_s: float = POLL_S) -> StopMarker:
    """Return the stop marker once the owner has stopped this clone."""
    async with FileWatch(folder.path, {folder.stop_file.name}, poll_s) as watch:
        while True:
            marker = folder.stop_marker()
            if marker is not None:
                return marker
            await watch.wait()


async def set_on_stop(folder: RunFolder, stop: asyncio.Event, poll_s: float = POLL_S) -> None:
    """Set `stop` when the stop marker appears: the stop signal `supervise_engine` takes."""
    marker = await wait_for_stop(folder, poll_s)
    log.info("stop marker found (%s)", marker.reason)
    stop.set()
