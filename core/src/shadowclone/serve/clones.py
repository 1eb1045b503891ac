"""What serve holds in memory: its settings, and one `Clone` per active clone.

Kept apart from the loop so that every part of serve (launching, stopping, recording,
sweeping) can name them without importing the loop itself.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from datetime import datetime
from typing import Protocol

import attrs

from shadowclone.config import Config, Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Handoff, Question, Record, Request
from shadowclone.notify.dispatch import BACKOFF_S
from shadowclone.plugin.types import LaunchSpec
from shadowclone.serve.spares import SPARE_DELAY_S


@attrs.frozen
class ServeSettings:
    stop_grace_s: float = 60.0
    """After a stop marker (or a final line), how long a clone has to save its work and exit
    before serve asks its launcher to stop it."""
    kill_grace_s: float = 10.0
    """The launcher's own grace between asking the clone to end and forcing it."""
    status_poll_s: float = 2.0
    """How often the launcher is asked about running clones: how soon a clone that died
    without its final line is found (one that wrote it is watched closely, `await_exit`)."""
    rescan_s: float = 5.0
    """The safety net: every clone is read again this often, events or not."""
    tick_s: float = 0.25
    """The longest serve sleeps between looking at its timers."""
    exit_poll_s: float = 0.01
    """How often a clone about to exit is asked after, until it has."""
    overload_restore_s: float = 30.0
    """After a login's last overload, how often the number of its clones that may run grows
    back by one, up to `parallel_clones`."""
    retention_s: float = 3600.0
    """How often serve removes the clones `[retention] older_than` says are old enough."""
    spare_delay_s: float = SPARE_DELAY_S
    """How long after a launch the next spare of its kind is started (not while the clone
    just launched starts its engine, which Docker's work would slow)."""
    spare_sweep_s: float = 60.0
    """How often serve looks for containers started ahead that no clone will take up."""
    notify_backoff_s: tuple[float, ...] = BACKOFF_S
    """The waits before each new try of a notification a notifier failed to deliver."""
    launch_lock_s: float = 5.0
    """How long a launch waits for a clone's stop lock (a `stop` holds it a moment); then
    the clone stays queued and the next pass tries again."""


@attrs.define
class Current:
    """The config serve follows, shared by its parts: a new config file reaches all at once."""

    config: Config
    paths: Paths


@attrs.define
class Clone:
    """What serve holds in memory for one active clone; the files stay the truth."""

    folder: RunFolder
    request: Request
    record: Record
    asked: dict[str, Question] = attrs.field(factory=dict)
    progress_offset: int = 0
    inbox_offset: int = 0
    deliveries_offset: int = 0
    delivered: set[str] = attrs.field(factory=set)
    stop_at: datetime | None = None
    """When the stop marker was written, if there is one."""
    final_at: datetime | None = None
    """When the final line was written, if it was."""
    stopping: threading.Thread | None = None
    preparing: Future[LaunchSpec] | None = None
    """The launcher's preparation under way (state `preparing`), on a thread of its own."""
    cancel: threading.Event = attrs.field(factory=threading.Event)
    """Set when the clone is stopped while it is prepared."""
    prepared: LaunchSpec | None = None
    """What the preparation made ready: the spec to launch."""
    waiting: Handoff | None = None
    """Set while the clone waits for its login's usage limit with nothing running
    (serve/scheduled.py): its launcher has no clone to report."""
    relaunched_at: datetime | None = None
    """When serve last launched it again after such a wait: a stop's grace counts from then."""

    @property
    def id(self) -> str:
        return self.folder.id

    @property
    def launched(self) -> bool:
        return self.record.state.launched


class Writes(Protocol):
    """How serve's parts write a record: always through the server's `write`, so that one
    hook (a test's, the notifications) sees every change."""

    def __call__(self, clone: Clone, record: Record, launch_failed: bool = False) -> None: ...


class Forgets(Protocol):
    """How serve's parts let a clone go once its ending is written."""

    def __call__(self, clone: Clone) -> None: ...
