"""serveClones: the queue, launching, records, exactly-once delivery and crash recovery.

Who writes what: `start` writes request.json (after the active marker), the clone appends
progress lines, the owner's `send` and `answer` append to the inbox, `stop` writes the stop
marker, and serve alone writes record.json and appends to deliveries.jsonl, the only
inbox the clone reads. The deliveries file is itself the record of what was delivered, so a
restart of serve, however abrupt, neither drops nor repeats a line.

serve sleeps on filesystem events for the clones folder (watchfiles, in a thread of its own),
wakes a few times a second to check its timers and asks the launcher how its clones are doing
every two seconds; everything is also read again every few seconds in case an event was
missed. A clone that has written its final line (or was asked to stop) is about to exit: a
short-lived thread asks the launcher about it every few milliseconds and wakes serve as soon
as it has, so its record shows the end (and the exit code) at once.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import logging.handlers
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import attrs
from watchfiles import Change, watch

from shadowclone import files
from shadowclone.config import Config, Paths
from shadowclone.environment.declared import cache_volumes
from shadowclone.environment.recipe import recipe_for
from shadowclone.errors import MalformedFile
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder, is_clone_id, run_folders
from shadowclone.node.schemas import (
    Handoff,
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    Request,
    State,
    Step,
    Throttles,
    now,
)
from shadowclone.node.servelock import ServeLock
from shadowclone.node.spares import spare_kind
from shadowclone.notify.dispatch import (
    BACKOFF_S,
    Dispatcher,
    links_for,
    make_dispatcher,
    notable,
    notification,
)
from shadowclone.plugin import contract
from shadowclone.plugin.manager import Registry, load_registry
from shadowclone.plugin.types import (
    CloneStatus,
    Launcher,
    LauncherSettings,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    NotifyEvent,
)
from shadowclone.serve import records, scheduled, sessions
from shadowclone.serve.following import ConfigFollower
from shadowclone.serve.spares import SPARE_DELAY_S, Spares

if TYPE_CHECKING:
    from shadowclone.dashboard.server import DashboardThread

log = logging.getLogger(__name__)

WATCHED_NAMES = frozenset({"request.json", "progress.jsonl", "inbox.jsonl", "stop.json"})
"""The run-folder files others write; serve's own writes (record, deliveries) wake nothing."""

RECENT_CLONES = 50
"""How far back a starting serve looks for the kinds of clones to keep spares for."""

MAX_HANDOFFS = 4
"""A clone is launched again for its next phase at most this often (a review takes two)."""

LABEL_CLONE = contract.LABEL_CLONE
LABEL_TARGET = contract.LABEL_TARGET


@attrs.frozen
class ServeSettings:
    stop_grace_s: float = 60.0
    """After a stop marker (or a final line), how long a clone has to save its work and exit
    before serve asks its launcher to stop it."""
    kill_grace_s: float = 10.0
    """The launcher's own grace between asking the clone to end and forcing it."""
    status_poll_s: float = 2.0
    """How often the launcher is asked about running clones: how soon a clone that died
    without its final line is found (one that wrote it is watched closely, `_await_exit`)."""
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
class Throttle:
    limit: int
    since: float
    """When the login was last heard overloaded, or its limit last grew (monotonic)."""


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


class Server:
    """One serve: the clones it follows and the launcher that runs them."""

    def __init__(
        self,
        config: Config,
        paths: Paths,
        launcher: Launcher,
        settings: ServeSettings,
        clock: Callable[[], datetime] = now,
        dispatcher: Dispatcher | None = None,
        *,
        registry: Registry | None = None,
        follower: ConfigFollower | None = None,
        on_config: Callable[[Config, Paths], None] | None = None,
    ) -> None:
        self.config = config
        self.dispatcher = dispatcher
        """Where the owner is told of questions, pauses and endings; None: nowhere."""
        self.links = links_for(config, paths) if dispatcher is not None else None
        self.paths = paths
        self.registry = registry
        """The plugins serve loaded: notifiers are built from it when `[notify]` changes."""
        self.follower = follower
        """The config file serve follows; None: the config given stays."""
        self.on_config = on_config
        """Told of each new config serve applies (serve's dashboard follows it)."""
        self._retention_wake = threading.Event()
        self.launcher = launcher
        self.settings = settings
        self.clock = clock
        self.clones: dict[str, Clone] = {}
        self._last_poll = 0.0
        self._throttles: dict[str, Throttle] = {}
        """Logins whose provider said "overloaded": how many of their clones may run now."""
        self._told_throttles: dict[str, int] | None = None
        """The limits last written to `throttles_file`."""
        self._spent: tuple[float, float] | None = None
        """(when, how much): the last reckoning of the daily cost, kept a moment."""
        self._last_rescan = 0.0
        self._last_sweep = 0.0
        self._events: queue.SimpleQueue[set[str]] = queue.SimpleQueue()
        """Ids of clones to look at now: from the file watcher and the exit waiters."""
        self._stopping = threading.Event()
        self.spares = Spares(paths.clones_dir, launcher, config.spares, settings.spare_delay_s)
        self.skipped: dict[str, str] = {}
        """Clones serve cannot follow (a run-folder file it cannot read or write), by id, with
        why: each is reported once, and every other clone goes on."""

    # ------------------------------------------------------------------ the loop

    def run(self, stop_event: threading.Event, ready: threading.Event | None = None) -> None:
        threading.Thread(
            target=self._retain, args=(stop_event,), name="retention", daemon=True
        ).start()
        if self.follower is not None:
            self.follower.publish()
            threading.Thread(
                target=self.follower.watch,
                args=(stop_event, lambda: self._events.put(set())),
                name="watch config",
                daemon=True,
            ).start()
        try:
            self._run(stop_event, ready)
        finally:
            self._retention_wake.set()

    def _run(self, stop_event: threading.Event, ready: threading.Event | None) -> None:
        self.recover()
        self.spares.begin(self._queued_folders())
        for kind, spec in self._recent_kinds():
            self.spares.launched(kind, spec, at_once=True)
        self._last_sweep = time.monotonic()
        try:
            self._serve(stop_event, ready)
        finally:
            self.spares.close()

    def _serve(self, stop_event: threading.Event, ready: threading.Event | None) -> None:
        self.launch_queued()
        # The first pass reads everything again: what changed before the watcher started
        # sent no event.
        self._last_poll, self._last_rescan = time.monotonic(), 0.0
        if ready is not None:
            ready.set()
        log.info(
            "serve (pid %d) is running: %d active clones, at most %d at once",
            os.getpid(),
            len(self.clones),
            self.config.parallel_clones,
        )
        for touched in self._changes(stop_event):
            self.step(touched)
        log.info("serve stops; running clones go on and the next serve takes them up")

    def _recent_kinds(self) -> list[tuple[str, LaunchSpec]]:
        """The kinds of the clones requested last (up to `spares`, among the last
        `RECENT_CLONES`), each with the spec its next clone would launch with: a serve that
        starts has them ready as if it had launched those clones itself."""
        from shadowclone.node.index import CloneIndex

        found: dict[str, LaunchSpec] = {}
        if not self.spares.possible:
            return []
        for clone_id in itertools.islice(CloneIndex(self.paths.clones_dir).newest(), RECENT_CLONES):
            folder = RunFolder(self.paths.clones_dir / clone_id)
            try:
                request = folder.request()
            except (OSError, MalformedFile):
                continue  # gone, a start under way, or unreadable: only a spare is lost
            kind = spare_kind(request)
            if kind is None or kind in found or request.launcher != self.config.launcher:
                continue
            record = Record(id=clone_id, state=State.QUEUED)
            found[kind] = self.spec(Clone(folder=folder, request=request, record=record))
            if len(found) >= self.config.spares:
                break
        return list(found.items())

    def _queued_folders(self) -> list[Path]:
        """The run folders of clones not launched yet: a spare taken there waits for them."""
        return [c.folder.path for c in self.clones.values() if c.record.state is State.QUEUED]

    def _retain(self, stop_event: threading.Event) -> None:
        """`[retention]`, on a thread of its own: deleting workspaces never holds up clones.
        At start, every `retention_s`, and at once when the config's `older_than` changes."""
        from shadowclone.config.durations import parse_duration
        from shadowclone.node.local import LocalNode

        while not stop_event.is_set():
            config, paths = self.config, self.paths
            if config.retention.older_than is not None:
                try:
                    older_than = parse_duration(config.retention.older_than)
                    for gone in LocalNode(config, paths).prune(older_than):
                        log.info(
                            "retention: removed clone %s (%s, %d bytes)",
                            gone.id,
                            gone.state,
                            gone.bytes,
                        )
                except Exception:
                    log.exception("retention: pruning failed; trying again later")
            self._retention_wake.wait(self.settings.retention_s)
            self._retention_wake.clear()

    # ------------------------------------------------------------------ the config

    def follow_config(self, force: bool = False) -> None:
        """Apply the config file if it changed and loads (`force`: read it even if it looks
        unchanged); one that does not load leaves the last good one in force."""
        if self.follower is None:
            return
        found = self.follower.check(force)
        if found is not None:
            self.apply_config(*found)

    def apply_config(self, config: Config, paths: Paths) -> None:
        """Every key serve uses, at once: the limits and caps on the next launch decision,
        the spares' number, retention, the notifiers and their answer links, the dashboard."""
        old = self.config
        self.config, self.paths = config, paths
        self._spent = None  # reckoned again against the new cap
        if config.spares != old.spares:
            self.spares.resize(config.spares)
        if config.retention != old.retention:
            self._retention_wake.set()
        if (config.notify, config.dashboard) != (old.notify, old.dashboard):
            self._renotify(config, paths)
        if self.on_config is not None:
            self.on_config(config, paths)

    def _renotify(self, config: Config, paths: Paths) -> None:
        """Notifiers built again from the new `[notify]`; the old ones finish on a thread."""
        old = self.dispatcher
        dispatcher = None
        if config.notify.use:
            registry = self.registry or load_registry(config.plugins.disabled)
            self.registry = registry
            dispatcher = make_dispatcher(config, paths, registry, self.settings.notify_backoff_s)
        self.dispatcher = dispatcher
        self.links = links_for(config, paths) if dispatcher is not None else None
        if old is not None:
            threading.Thread(target=old.close, name="notifiers closing", daemon=True).start()

    def step(self, touched: set[str]) -> None:
        """One pass: the clones whose files changed, then the timers, then the queue."""
        if touched:
            log.debug("files changed for clones %s", ", ".join(sorted(touched)))
        for clone_id in sorted(touched):
            with self.guard(clone_id):
                clone = self.clones.get(clone_id) or self.track(clone_id)
                if clone is not None:
                    self.sync(clone)
        moment = time.monotonic()
        if moment - self._last_rescan >= self.settings.rescan_s:
            self._last_rescan = moment
            self.rescan()
        if moment - self._last_poll >= self.settings.status_poll_s:
            self._last_poll = moment
            self.poll([c for c in self.clones.values() if c.launched])
        else:  # a clone that has said its last word, or was stopped, is about to exit
            self.poll([c for c in self.clones.values() if c.launched and (c.final_at or c.stop_at)])
        if moment - self._last_sweep >= self.settings.spare_sweep_s:
            self._last_sweep = moment
            self.spares.sweep(self._queued_folders())
        self.check_deadlines()
        scheduled.launch_due(self)
        self.launch_queued()

    def _changes(self, stop_event: threading.Event) -> Iterator[set[str]]:
        """Ids of clones whose files changed or that exited, or an empty set at least every
        `tick_s`."""
        self._stopping = stop_event
        watcher = threading.Thread(
            target=self._watch, args=(stop_event,), name="watch clones", daemon=True
        )
        watcher.start()
        while not stop_event.is_set():
            try:
                touched = self._events.get(timeout=self.settings.tick_s)
            except queue.Empty:
                touched = set()
            with contextlib.suppress(queue.Empty):
                while True:  # what else arrived meanwhile: one pass for all
                    touched |= self._events.get_nowait()
            yield touched
        watcher.join(timeout=5)

    def _watch(self, stop_event: threading.Event) -> None:
        root = self.paths.clones_dir

        def wanted(_change: Change, path: str) -> bool:
            return _clone_of(Path(path)) is not None

        try:
            for changes in watch(
                root,
                watch_filter=wanted,
                # Quiet for a step, or 50 ms at most while clones keep writing: a new request
                # or an answer is not held back by busy neighbours.
                debounce=50,
                step=10,
                stop_event=stop_event,
                raise_interrupt=False,
            ):
                self._events.put({c for _, path in changes if (c := _clone_of(Path(path)))})
        except (OSError, RuntimeError) as error:
            log.warning(
                "cannot watch %s (%s); reading it every %s s", root, error, self.settings.tick_s
            )
        finally:
            self._events.put(set())  # serve stops (or reads on a timer): wake it now

    def _await_exit(self, clone: Clone) -> None:
        """Wake serve as soon as `clone`, which said its last word or was asked to stop, has
        exited (bounded by the time serve gives it before stopping it)."""
        clone_id = clone.id
        limit = self.settings.stop_grace_s + self.settings.kill_grace_s

        def wait() -> None:
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline and not self._stopping.is_set():
                try:
                    state = self.launcher.status(clone_id).state
                except Exception:  # noqa: BLE001 - serve's own poll reports launcher trouble
                    return
                if state is not LaunchState.RUNNING:
                    self._events.put({clone_id})
                    return
                time.sleep(self.settings.exit_poll_s)

        threading.Thread(target=wait, name=f"exit of {clone_id}", daemon=True).start()

    # ------------------------------------------------------------------ finding clones

    def recover(self) -> None:
        """At start: take up every active clone, and settle with the launcher what happened
        while no serve ran."""
        self._tell_throttles()  # none yet: what an earlier serve held back is not held now
        try:
            files.make_folder(self.paths.active_dir)
        except MalformedFile as error:
            log.error("%s; clones are found by their run folders alone", error)
        for clone_id in sorted(self._candidates()):
            with self.guard(clone_id):
                self.track(clone_id)
        known = {status.clone_id: status for status in self.launcher.running()}
        for clone in list(self.clones.values()):
            with self.guard(clone.id):
                self.reconcile(clone, known.get(clone.id) or self.launcher.status(clone.id))
        for clone_id, status in known.items():
            if clone_id not in self.clones:
                with self.guard(clone_id):
                    self.settle_orphan(clone_id, status)

    def _candidates(self) -> set[str]:
        """Active markers, and (once, at start) every run folder whose record is missing or
        active: a marker may have been removed by admission for a stopped queued clone."""
        ids = self._markers()
        for folder in run_folders(self.paths.clones_dir):
            if folder.id in ids or not folder.exists():
                continue
            try:
                record = folder.record()
            except MalformedFile:
                ids.add(folder.id)
                continue
            if record is None or record.state.active:
                ids.add(folder.id)
        return ids

    def _markers(self) -> set[str]:
        try:
            files.check_plain_folder(self.paths.active_dir)
            return {n for n in os.listdir(self.paths.active_dir) if is_clone_id(n)}
        except FileNotFoundError:
            return set()
        except (MalformedFile, OSError) as error:
            self.report("active", f"cannot read the active markers: {error}")
            return set()

    def report(self, key: str, problem: str) -> None:
        """Log a problem once (serve looks again every few seconds)."""
        if self.skipped.get(key) != problem:
            self.skipped[key] = problem
            log.error("%s", problem)

    @contextlib.contextmanager
    def guard(self, clone_id: str) -> Iterator[None]:
        """Whatever a clone's files hold, only that clone is skipped (and reported): serve
        goes on with every other clone."""
        try:
            yield
        except MalformedFile as error:
            self.skip(clone_id, error)

    def skip(self, clone_id: str, error: MalformedFile) -> None:
        """Stop following a clone whose run folder serve cannot read or write: record that it
        failed and why where the record can be written, and let the launcher end it."""
        self.report(clone_id, f"clone {clone_id} is skipped: {error}")
        clone = self.clones.pop(clone_id, None)
        if clone is not None:
            try:
                reason = f"serve cannot follow it: {error}"
                self.write(clone, records.failed(clone.record, reason, self.clock()))
            except MalformedFile as again:
                self.report(f"{clone_id} record", f"clone {clone_id}: {again}")
        self._release(clone_id)

    def rescan(self) -> None:
        self.follow_config(force=True)
        for clone_id in sorted(self._markers() - self.clones.keys()):
            with self.guard(clone_id):
                self.track(clone_id)
        for clone in list(self.clones.values()):
            with self.guard(clone.id):
                self.sync(clone)

    def track(self, clone_id: str) -> Clone | None:
        """Start following a clone, writing its first record if it has none; None for a
        clone that is not (or no longer) active."""
        folder = RunFolder(self.paths.clones_dir / clone_id)
        try:
            request = folder.request()
        except FileNotFoundError:
            return None  # a start in progress, or a marker left by a start that died
        except MalformedFile as error:
            log.error("clone %s cannot run: %s", clone_id, error)
            self._end_untracked(folder, str(error))
            return None
        try:
            record = folder.record()
        except MalformedFile as error:
            # Only serve writes it, atomically: rebuild it, and let the launcher say whether
            # the clone runs rather than risk launching it twice.
            log.error("%s; rebuilding it", error)
            record = Record(id=clone_id, state=State.RUNNING, reason=f"record rebuilt: {error}")
            folder.write_record(record)
        if record is None:
            record = Record(id=clone_id, state=State.QUEUED, updated_at=self.clock())
            folder.write_record(record)
            log.info("clone %s on %s is queued", clone_id, request.target.key)
        if not record.state.active:
            self._release(clone_id)
            return None
        clone = Clone(folder=folder, request=request, record=record)
        delivered, _, clone.deliveries_offset = folder.deliveries()
        clone.delivered = {line.id for line in delivered}
        self.clones[clone_id] = clone
        self.read_progress(clone)
        return clone

    def reconcile(self, clone: Clone, status: CloneStatus) -> None:
        """Settle one clone with its launcher's word, after a restart."""
        if clone.record.state is State.PREPARING:
            # Its preparation ended with the serve that ran it: it is prepared again (an image
            # built meanwhile is found by its tag), unless the launch had begun.
            log.info("clone %s was being prepared when serve stopped; it is queued", clone.id)
            self.write(clone, attrs.evolve(clone.record, state=State.QUEUED))
        record = clone.record
        if record.state is State.QUEUED:
            if status.state is LaunchState.MISSING:
                if record.launching_at is not None:
                    log.info("clone %s never reached its launcher; it stays queued", clone.id)
                    self.write(clone, attrs.evolve(record, launching_at=None))
                return
            log.info("clone %s was launched before serve stopped; following it", clone.id)
            started = record.launching_at or self.clock()
            self.write(
                clone,
                attrs.evolve(record, state=State.RUNNING, started_at=started, launching_at=None),
            )
            self.read_progress(clone)
            if status.state is LaunchState.RUNNING and self._stopped_in_launch(clone):
                return
        if scheduled.take_up(self, clone, status):
            return
        if status.state is LaunchState.MISSING:
            self.vanished(clone)
        elif status.state is LaunchState.EXITED:
            self.finish(clone, status)
        else:
            self.deliver(clone)

    def settle_orphan(self, clone_id: str, status: CloneStatus) -> None:
        """A clone the launcher has and serve does not follow: ended ones are removed; one
        with no run folder here is left alone (it may belong to another clones folder)."""
        folder = RunFolder(self.paths.clones_dir / clone_id)
        if not folder.exists():
            log.warning(
                "the launcher has clone %s (%s), which has no run folder in %s; leaving it",
                clone_id,
                status.state,
                self.paths.clones_dir,
            )
            return
        self._release(clone_id)

    # ------------------------------------------------------------------ following a clone

    def sync(self, clone: Clone) -> None:
        self.read_progress(clone)
        marker = clone.folder.stop_marker()
        if marker is not None and clone.stop_at is None and clone.launched:
            self._await_exit(clone)
        clone.stop_at = marker.at if marker is not None else None
        if clone.record.state is State.QUEUED and marker is not None:
            log.info("clone %s was stopped before it started", clone.id)
            self.write(clone, records.stopped_in_queue(clone.record, self.clock()))
            self._forget(clone)
            return
        if clone.record.state is State.PREPARING and clone.record.launching_at is None:
            self.follow_preparation(clone, stopped=marker is not None)
        if clone.launched:
            self.deliver(clone)

    def read_progress(self, clone: Clone) -> None:
        from_start = clone.progress_offset == 0
        lines, _, clone.progress_offset = clone.folder.progress(clone.progress_offset)
        if not lines:
            return
        if clone.launched and any(line.kind is ProgressKind.OVERLOADED for line in lines):
            self._overloaded(clone.request.login)
        final = next((line for line in reversed(lines) if line.final), None)
        if final is not None and clone.final_at is None:
            clone.final_at = final.at
            if clone.launched:
                self._await_exit(clone)
        self.write(clone, records.fold_progress(clone.record, lines, clone.asked, from_start))

    def deliver(self, clone: Clone) -> None:
        """Copy each inbox line the clone has not had to its deliveries, once."""
        seen, _, clone.deliveries_offset = clone.folder.deliveries(clone.deliveries_offset)
        clone.delivered.update(line.id for line in seen)
        lines, _, clone.inbox_offset = clone.folder.inbox(clone.inbox_offset)
        for line in lines:
            if line.id in clone.delivered:
                continue
            files.append_line(clone.folder.deliveries_file, schemas.dumps(line))
            clone.delivered.add(line.id)
            log.info("delivered %s %s to clone %s", line.kind, line.id, clone.id)

    def check_deadlines(self) -> None:
        """A clone stopped (or finished) `stop_grace_s` ago that still runs is stopped by its
        launcher."""
        moment = self.clock()
        grace = timedelta(seconds=self.settings.stop_grace_s)
        for clone in self.clones.values():
            if not clone.launched or clone.stopping is not None or clone.waiting is not None:
                continue
            marks = [t for t in (clone.stop_at, clone.final_at) if t is not None]
            if not marks or moment - max(min(marks), clone.relaunched_at or min(marks)) < grace:
                continue
            why = "a stop marker" if clone.stop_at is not None else "its final line"
            log.info("clone %s still runs %s after %s; stopping it", clone.id, grace, why)
            clone.stopping = threading.Thread(
                target=self._stop, args=(clone.id,), name=f"stop {clone.id}", daemon=True
            )
            clone.stopping.start()

    def _stop(self, clone_id: str) -> None:
        try:
            self.launcher.stop(clone_id, grace_s=self.settings.kill_grace_s)
        except Exception:
            log.exception("the launcher could not stop clone %s", clone_id)

    def poll(self, clones: list[Clone]) -> None:
        """Ask the launcher about `clones` and record the ones that have ended."""
        if not clones:
            return
        try:
            known = {status.clone_id: status for status in self.launcher.running()}
            for clone in (c for c in clones if c.waiting is None):
                status = known.get(clone.id) or self.launcher.status(clone.id)
                with self.guard(clone.id):
                    if status.state is LaunchState.EXITED:
                        self.finish(clone, status)
                    elif status.state is LaunchState.MISSING:
                        self.vanished(clone)
        except Exception:
            log.exception("cannot ask the launcher about its clones; trying again soon")

    # ------------------------------------------------------------------ the queue

    def launch_queued(self) -> None:
        """Queued clones start in request order, at most `parallel_clones` at once, and one at
        a time per login that allows only one; by the config file as it is now."""
        self.follow_config()
        running = [c for c in self.clones.values() if c.record.state.admitted]
        queued = sorted(
            (c for c in self.clones.values() if c.record.state is State.QUEUED),
            key=lambda c: (c.request.requested_at, c.id),
        )
        busy = {c.request.login for c in running}
        moment = self.clock()
        # A login whose usage limit is reached takes no new clone until it resets.
        limited = {
            c.request.login
            for c in running
            if c.record.scheduled_until is not None and c.record.scheduled_until > moment
        }
        if queued and self._over_daily_cost():
            return
        throttled = self._throttle_limits()  # grown back on time, also with no queue
        per_login: dict[str, int] = {}
        for c in running:
            per_login[c.request.login] = per_login.get(c.request.login, 0) + 1
        for clone in queued:
            if len(running) >= self.config.parallel_clones:
                return
            if clone.request.one_at_a_time and clone.request.login in busy:
                continue
            if clone.request.login in limited:
                continue
            login = clone.request.login
            if login in throttled and per_login.get(login, 0) >= throttled[login]:
                continue
            with self.guard(clone.id):
                if clone.folder.stop_marker() is not None:
                    self.sync(clone)  # stopped in the queue: never starts
                    continue
                self.launch(clone)
            if clone.record.state.admitted:
                running.append(clone)
                busy.add(clone.request.login)
                per_login[login] = per_login.get(login, 0) + 1

    def _overloaded(self, login: str) -> None:
        """Halve how many clones of `login` may run (at least one), once per quiet spell."""
        running = sum(1 for c in self.clones.values() if c.launched and c.request.login == login)
        moment = time.monotonic()
        throttle = self._throttles.get(login)
        if throttle is not None and moment - throttle.since < self.settings.overload_restore_s:
            throttle.since = moment  # the same storm: it lasts longer
            return
        limit = max(1, min(throttle.limit if throttle else running, running) // 2)
        self._throttles[login] = Throttle(limit, moment)
        log.info(
            "the provider of login %s is overloaded: at most %d of its clones run", login, limit
        )
        self._tell_throttles()

    def _throttle_limits(self) -> dict[str, int]:
        """The logins held back for an overload, each limit grown back by one per quiet
        `overload_restore_s` and dropped once it reaches `parallel_clones`."""
        moment = time.monotonic()
        for login, throttle in list(self._throttles.items()):
            if moment - throttle.since >= self.settings.overload_restore_s:
                throttle.limit += 1
                throttle.since = moment
                if throttle.limit >= self.config.parallel_clones:
                    del self._throttles[login]
                    log.info("the provider of login %s is no longer held back", login)
        self._tell_throttles()
        return {login: throttle.limit for login, throttle in self._throttles.items()}

    def _tell_throttles(self) -> None:
        """Write the logins held back, when that changed, for `get` and `status`; serve's
        own choices never read the file."""
        limits = {login: throttle.limit for login, throttle in self._throttles.items()}
        if limits == self._told_throttles:
            return
        try:
            schemas.write(self.paths.throttles_file, Throttles(limits))
        except OSError as error:
            log.warning("cannot write %s: %s", self.paths.throttles_file, error)
            return
        self._told_throttles = limits

    def _over_daily_cost(self) -> bool:
        """`daily_cost_usd` is spent: queued clones wait (reckoned at most every poll)."""
        from shadowclone.node.admission import DAY, daily_cost_reason, spent_since
        from shadowclone.node.index import CloneIndex

        cap = self.config.limits.daily_cost_usd
        if cap is None:
            return False
        moment = time.monotonic()
        if self._spent is None or moment - self._spent[0] >= self.settings.status_poll_s:
            spent = spent_since(self.paths, CloneIndex(self.paths.clones_dir), self.clock() - DAY)
            if spent >= cap and (self._spent is None or self._spent[1] < cap):
                log.info("queued clones wait for %s", daily_cost_reason(spent, cap))
            self._spent = (moment, spent)
        return self._spent[1] >= cap

    def launch(self, clone: Clone) -> None:
        """A stop always wins over a launch that has not begun. From its last look at the stop
        marker to its running record, the launch holds the clone's stop lock, which `stop`
        takes to write its marker: either the marker is there before the launch looks (the
        clone never starts: no `started_at`, no step, its issue free at once), or `stop`
        waits until the clone runs, says so, and the clone is stopped as any running one.
        `launching_at` is written under the lock too: outside it, a queued record with it
        set means a serve died mid-launch, which the next serve settles with the launcher."""
        spec = clone.prepared or self.spec(clone)
        if spec.environment is not None and clone.prepared is None:
            self.prepare(clone, spec)
            return
        try:
            with clone.folder.stop_lock(timeout=self.settings.launch_lock_s):
                if not self._launch_unless_stopped(clone, spec):
                    return
        except files.LockBusy:
            log.warning("clone %s: a stop holds its stop lock; its launch waits", clone.id)
            return
        log.info("clone %s on %s is running", clone.id, clone.request.target.key)
        self.spares.launched(spare_kind(clone.request), spec)
        self.read_progress(clone)
        if self._stopped_in_launch(clone):
            return
        self.deliver(clone)

    def _launch_unless_stopped(self, clone: Clone, spec: LaunchSpec) -> bool:
        """Under the clone's stop lock: launch it unless it has a stop marker; True if it
        runs now."""
        if clone.folder.stop_marker() is not None:
            log.info("clone %s was stopped as it was about to launch; it never starts", clone.id)
            self.write(clone, records.stopped_in_queue(clone.record, self.clock()))
            self._forget(clone)
            return False
        moment = self.clock()
        self.write(clone, attrs.evolve(clone.record, launching_at=moment))
        sessions.give(self.paths, clone.folder, clone.request)
        try:
            self.launcher.launch(spec)
        except Exception as error:  # noqa: BLE001 - any launcher failure fails this clone only
            log.error("clone %s could not be launched: %s", clone.id, error)
            reason = f"launch failed: {error}"
            self.write(clone, records.failed(clone.record, reason, moment), launch_failed=True)
            self._forget(clone)
            return False
        self.write(
            clone,
            attrs.evolve(clone.record, state=State.RUNNING, started_at=moment, launching_at=None),
        )
        return True

    def prepare(self, clone: Clone, spec: LaunchSpec) -> None:
        """Have the launcher make ready what the clone needs (its environment's image) on a
        thread of its own; the clone is `preparing` meanwhile and holds its slot. The state
        is written before the stop marker is read, as `launch` does with `launching_at`."""
        self.write(clone, attrs.evolve(clone.record, state=State.PREPARING))
        if clone.folder.stop_marker() is not None:
            log.info("clone %s was stopped as it was about to launch; it never starts", clone.id)
            self.write(clone, records.stopped_in_queue(clone.record, self.clock()))
            self._forget(clone)
            return
        log.info("clone %s on %s is being prepared", clone.id, clone.request.target.key)
        future: Future[LaunchSpec] = Future()
        clone.preparing = future
        folder, clone_id, cancel = clone.folder, clone.id, clone.cancel

        def say(text: str) -> None:
            line = ProgressLine(Step.PREPARE, ProgressKind.NOTE, text)
            folder.append_progress(records.scrubbed_line(line))

        def run() -> None:
            try:
                future.set_result(self.launcher.prepare(spec, say, cancel))
            except BaseException as error:  # noqa: BLE001 - handed to serve's loop
                future.set_exception(error)
            finally:
                self._events.put({clone_id})

        threading.Thread(target=run, name=f"prepare {clone_id}", daemon=True).start()

    def follow_preparation(self, clone: Clone, stopped: bool) -> None:
        """A clone being prepared: stopped, it gives up; prepared, it is launched; failed, it
        ends with why."""
        if stopped:
            clone.cancel.set()
        future = clone.preparing
        if future is None or not future.done():
            return
        clone.preparing = None
        if stopped:
            log.info("clone %s was stopped while it was being prepared", clone.id)
            self.write(clone, records.stopped_in_queue(clone.record, self.clock()))
            self._forget(clone)
            return
        try:
            spec = future.result()
        except Exception as error:  # noqa: BLE001 - any failure fails this clone only
            log.error("clone %s could not be prepared: %s", clone.id, error)
            reason = f"its launch could not be prepared: {error}"
            failed = records.failed(clone.record, reason, self.clock())
            self.write(clone, failed, launch_failed=True)
            self._forget(clone)
            return
        clone.prepared = spec
        image = spec.image if spec.image != clone.request.image else None
        self.write(clone, attrs.evolve(clone.record, image=image))
        self.launch(clone)

    def _stopped_in_launch(self, clone: Clone) -> bool:
        """A stop written as the clone was launched (`stop` waited for the launch, or a serve
        died mid-launch): it has no work to save yet, so the launcher stops it now rather
        than after the stop grace."""
        marker = clone.folder.stop_marker()
        if marker is None:
            return False
        log.info("clone %s was stopped while it was launched; stopping it now", clone.id)
        clone.stop_at = marker.at
        if clone.stopping is None:
            clone.stopping = threading.Thread(
                target=self._stop, args=(clone.id,), name=f"stop {clone.id}", daemon=True
            )
            clone.stopping.start()
        self._await_exit(clone)
        return True

    def spec(self, clone: Clone, network: NetworkMode = NetworkMode.OPEN) -> LaunchSpec:
        request = clone.request
        model_host = request.model_host
        if model_host is None and request.base_url:
            model_host = urlparse(request.base_url).netloc or None
        login_state = None
        if request.token_url:
            login_state = self.paths.login_state(request.login)
            login_state.mkdir(mode=0o700, parents=True, exist_ok=True)
        environment = None
        if request.environment is not None and clone.record.image is None:
            environment = recipe_for(self.config, self.paths, request.target.repo_full_name)
        return LaunchSpec(
            clone_id=clone.id,
            run_folder=clone.folder.path,
            secrets_file=self.paths.secrets_file,
            image=clone.record.image or request.image,
            environment=environment,
            network=network,
            model_host=model_host,
            auth_host=urlparse(request.token_url).netloc or None if request.token_url else None,
            login_state=login_state,
            labels={LABEL_CLONE: clone.id, LABEL_TARGET: request.target.key},
            env={contract.CLONE_ID_VARIABLE: clone.id},
            cpus=self.config.limits.cpus,
            memory=self.config.limits.memory,
            # A network-off phase works for a stranger: nothing it writes may reach the
            # owner's next clones.
            caches=cache_volumes(request.target.repo_full_name, request.caches)
            if network is NetworkMode.OPEN
            else {},
        )

    # ------------------------------------------------------------------ endings

    def finish(self, clone: Clone, status: CloneStatus) -> None:
        """The launcher says the clone exited: record how, then let it go; or, if it
        handed its work on to a next phase, launch that."""
        self.read_progress(clone)
        if clone.final_at is None and self.hand_on(clone, status):
            return
        stop_requested = clone.folder.stop_marker() is not None
        record = records.ended(clone.record, status, stop_requested, self.clock())
        sessions.remember(self.paths, clone.folder, clone.request, record)
        self.write(clone, record)
        log.info(
            "clone %s ended %s (exit code %s)%s",
            clone.id,
            record.state,
            record.exit_code,
            f": {record.reason}" if record.reason else "",
        )
        self._forget(clone)

    def hand_on(self, clone: Clone, status: CloneStatus) -> bool:
        """Launch the next phase a clone asked for in its handoff file; False if there is
        none to launch. The new phase deletes the file when it starts, so a serve that crashed
        in between finds it again and launches the phase then."""
        try:
            handoff = clone.folder.handoff()
        except MalformedFile as error:
            log.error("clone %s: %s", clone.id, error)
            return False
        if handoff is None or status.exit_code != 0:
            return False
        if handoff.waits:
            scheduled.park(self, clone, handoff)
            return True
        if clone.record.handoffs >= MAX_HANDOFFS:
            log.error("clone %s asked for more than %d phases", clone.id, MAX_HANDOFFS)
            return False
        log.info(
            "clone %s goes on to %s with the network %s", clone.id, handoff.resume, handoff.network
        )
        try:
            self.launcher.remove(clone.id)
            self.launcher.launch(self.spec(clone, handoff.network))
        except Exception as error:  # noqa: BLE001 - any launcher failure fails this clone only
            reason = f"launch of its {handoff.resume} phase failed: {error}"
            self.write(clone, records.failed(clone.record, reason, self.clock()))
            self._forget(clone)
            return True
        self.write(clone, attrs.evolve(clone.record, handoffs=clone.record.handoffs + 1))
        return True

    def vanished(self, clone: Clone) -> None:
        log.error("clone %s was running and its launcher no longer knows it", clone.id)
        reason = "vanished: the launcher has no trace of this clone"
        self.write(clone, records.failed(clone.record, reason, self.clock()))
        self._forget(clone)

    def _forget(self, clone: Clone) -> None:
        """Only once the ending is written: drop the active marker, then the launcher's copy."""
        self.clones.pop(clone.id, None)
        self._release(clone.id)

    def _release(self, clone_id: str) -> None:
        try:
            files.remove(self.paths.active_dir / clone_id)
        except MalformedFile as error:
            self.report(f"{clone_id} marker", f"clone {clone_id}: {error}")
        try:
            if self.launcher.status(clone_id).state is not LaunchState.MISSING:
                self.launcher.remove(clone_id)
        except Exception:
            log.exception("the launcher could not remove clone %s", clone_id)

    def _end_untracked(self, folder: RunFolder, reason: str) -> None:
        try:
            record = folder.record()
        except MalformedFile:
            record = None
        if record is None or record.state.active:
            base = record or Record(id=folder.id, state=State.QUEUED)
            folder.write_record(records.scrubbed(records.failed(base, reason, self.clock())))
        self._release(folder.id)

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


def _clone_of(path: Path) -> str | None:
    """The clone a changed path belongs to, if it is one serve reacts to."""
    parent = path.parent.name
    if parent == "active":
        return path.name if is_clone_id(path.name) else None
    if is_clone_id(parent) and path.name in WATCHED_NAMES:
        return parent
    return None


@contextlib.contextmanager
def _log_file(paths: Paths) -> Iterator[None]:
    """serve's log in the clones folder, beside stderr (the CLI sets that up)."""
    package = logging.getLogger("shadowclone")
    handler = logging.handlers.RotatingFileHandler(
        paths.serve_log, maxBytes=5_000_000, backupCount=2, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = package.level
    if package.getEffectiveLevel() > logging.INFO:
        package.setLevel(logging.INFO)
    package.addHandler(handler)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
        handler.close()


def serve_clones(
    config: Config,
    paths: Paths,
    registry: Registry | None = None,
    stop_event: threading.Event | None = None,
    *,
    launcher: Launcher | None = None,
    settings: ServeSettings | None = None,
    ready: threading.Event | None = None,
    follower: ConfigFollower | None = None,
) -> None:
    """Run clones until `stop_event` is set (serveClones).

    Holds serve.lock for its whole life: a second serve raises `Refused` naming the process
    that holds it. The launcher is the config's, from `registry`, unless one is given. `ready`
    is set once the clones of an earlier serve have been taken up. Returning leaves the
    clones running; the next serve goes on with them. serve follows the config file from
    then on (`follower`, by default one that keeps `config` until the file changes).
    """
    stop_event = stop_event or threading.Event()
    follower = follower or ConfigFollower(config, paths)
    with ServeLock(paths), _log_file(paths):
        if launcher is None:
            registry = registry or load_registry(config.plugins.disabled)
            settings_of = LauncherSettings(paths.clones_dir, config.image)
            launcher = registry.launcher(config.launcher).factory(settings_of)
        launcher.check()
        for stray in launcher.reap_strays():
            log.info("removed %s, left behind by an earlier serve", stray)
        settings = settings or ServeSettings()
        dispatcher = None
        if config.notify.use:
            registry = registry or load_registry(config.plugins.disabled)
            dispatcher = make_dispatcher(config, paths, registry, settings.notify_backoff_s)
        dashboard = ServedDashboard()
        dashboard.follow(config, paths)
        server = Server(
            config,
            paths,
            launcher,
            settings,
            dispatcher=dispatcher,
            registry=registry,
            follower=follower,
            on_config=dashboard.follow_later,
        )
        try:
            server.run(stop_event, ready)
        finally:
            follower.withdraw()
            if server.dispatcher is not None:
                server.dispatcher.close()
            dashboard.stop()


class ServedDashboard:
    """The dashboard serve runs with `[dashboard] serve = true`, following the config: started,
    stopped or moved as `[dashboard]` changes (on a thread of its own, not to hold serve's
    loop), and otherwise given each new config in place."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: DashboardThread | None = None
        self._closed = False

    def follow(self, config: Config, paths: Paths) -> None:
        from shadowclone.dashboard.server import DashboardThread

        with self._lock:
            if self._closed:
                return
            running = self._thread
            if running is not None and running.config.dashboard == config.dashboard:
                running.node.config = config
                return
            if running is not None:
                running.stop()
                self._thread = None
            if config.dashboard.serve:
                self._thread = DashboardThread(config, paths)
                self._thread.start()

    def follow_later(self, config: Config, paths: Paths) -> None:
        threading.Thread(
            target=self.follow, args=(config, paths), name="dashboard config", daemon=True
        ).start()

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            if self._thread is not None:
                self._thread.stop()
                self._thread = None
