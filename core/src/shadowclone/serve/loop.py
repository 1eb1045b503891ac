"""serveClones: the queue, launching, records, exactly-once delivery and crash recovery.

Who writes what: `start` writes request.json (after the active marker), the clone appends
progress lines, the owner's `send` and `answer` append to the inbox, `stop` writes the stop
marker, and serve alone writes record.json and appends to deliveries.jsonl, the only
inbox the clone reads (serve/delivering.py).

serve sleeps on filesystem events for the clones folder (watchfiles, in a thread of its own),
wakes a few times a second to check its timers and asks the launcher how its clones are doing
every two seconds; everything is also read again every few seconds in case an event was
missed. A clone that has written its final line (or was asked to stop) is about to exit: a
short-lived thread asks the launcher about it every few milliseconds and wakes serve as soon
as it has, so its record shows the end (and the exit code) at once (serve/stopping.py).

This module is the loop; its parts each live in a module of their own and are given what
they need: launching (serve/launching.py), stopping (serve/stopping.py), records
(serve/recording.py), cleanup and recovery (serve/sweeping.py), what wakes it (serve/watching.py)
and the per-login limits
(serve/limits.py).
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from shadowclone.config import Config, Paths
from shadowclone.node.schemas import Record, State, now
from shadowclone.node.servelock import ServeLock
from shadowclone.notify.dispatch import Dispatcher, make_dispatcher
from shadowclone.plugin.manager import Registry, load_registry
from shadowclone.plugin.types import (
    Launcher,
    LauncherSettings,
    LaunchSpec,
    LaunchState,
    NetworkMode,
)
from shadowclone.relay.server import RelayFor, start_relay
from shadowclone.serve import scheduled
from shadowclone.serve.clones import Clone, Current, ServeSettings
from shadowclone.serve.delivering import deliver
from shadowclone.serve.following import ConfigFollower
from shadowclone.serve.launching import (
    LABEL_CLONE,
    LABEL_TARGET,
    MAX_HANDOFFS,
    RECENT_CLONES,
    recent_kinds,
)
from shadowclone.serve.limits import Throttle
from shadowclone.serve.parts import build_parts
from shadowclone.serve.served_dashboard import ServedDashboard
from shadowclone.serve.spares import Spares
from shadowclone.serve.watching import ChangeFeed

__all__ = [
    "LABEL_CLONE",
    "LABEL_TARGET",
    "MAX_HANDOFFS",
    "RECENT_CLONES",
    "Clone",
    "ServeSettings",
    "ServedDashboard",
    "Server",
    "Throttle",
    "serve_clones",
]

log = logging.getLogger(__name__)


class Server:
    """One serve: the loop over the clones it follows and the launcher that runs them."""

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
        relay: RelayFor | None = None,
    ) -> None:
        self.current = Current(config, paths)
        self.relay = relay
        """Each clone's access to serve's relay (`RelayingLauncher`); None without one."""
        self.launcher = launcher
        self.settings = settings
        self.clock = clock
        self.clones: dict[str, Clone] = {}
        self.follower = follower
        """The config file serve follows; None: the config given stays."""
        self.on_config = on_config
        """Told of each new config serve applies (serve's dashboard follows it)."""
        self._last = {"poll": 0.0, "rescan": 0.0, "sweep": 0.0}
        """When serve last polled the launcher, read every clone again, swept the spares."""
        self.feed = ChangeFeed(paths.clones_dir, settings.tick_s)
        self.spares = Spares(paths.clones_dir, launcher, config.spares, settings.spare_delay_s)
        self.parts = build_parts(self, dispatcher, registry)

    @property
    def config(self) -> Config:
        return self.current.config

    @property
    def paths(self) -> Paths:
        return self.current.paths

    # ------------------------------------------------------------------ the loop

    def run(self, stop_event: threading.Event, ready: threading.Event | None = None) -> None:
        self.parts.retention.start(stop_event)
        watcher = None
        if self.follower is not None:
            self.follower.publish()
            watcher = threading.Thread(
                target=self.follower.watch,
                args=(stop_event, lambda: self.feed.wake(set())),
                name="watch config",
                daemon=True,
            )
            watcher.start()
        try:
            self._run(stop_event, ready)
        finally:
            self.parts.retention.wake.set()
            if watcher is not None and stop_event.is_set():
                # The watcher's native thread must be done before the interpreter may end:
                # one still inside it at exit crashes the process.
                watcher.join(timeout=5)

    def _run(self, stop_event: threading.Event, ready: threading.Event | None) -> None:
        self.recover()
        self.spares.begin(self._queued_folders())
        for kind, spec in recent_kinds(self.current, self.spares, self.spec):
            self.spares.launched(kind, spec, at_once=True)
        self._last["sweep"] = time.monotonic()
        try:
            self._serve(stop_event, ready)
        finally:
            self.spares.close()

    def _serve(self, stop_event: threading.Event, ready: threading.Event | None) -> None:
        self.launch_queued()
        # The first pass reads everything again: what changed before the watcher started
        # sent no event.
        self._last["poll"], self._last["rescan"] = time.monotonic(), 0.0
        if ready is not None:
            ready.set()
        log.info(
            "serve (pid %d) is running: %d active clones, at most %d at once",
            os.getpid(),
            len(self.clones),
            self.config.parallel_clones,
        )
        for touched in self.feed.changes(stop_event):
            self.step(touched)
        log.info("serve stops; running clones go on and the next serve takes them up")

    def _queued_folders(self) -> list[Path]:
        """The run folders of clones not launched yet: a spare taken there waits for them."""
        return [c.folder.path for c in self.clones.values() if c.record.state is State.QUEUED]

    def step(self, touched: set[str]) -> None:
        """One pass: the clones whose files changed, then the timers, then the queue."""
        if touched:
            log.debug("files changed for clones %s", ", ".join(sorted(touched)))
        for clone_id in sorted(touched):
            with self.guard(clone_id):
                clone = self.clones.get(clone_id) or self.parts.recovery.track(clone_id)
                if clone is not None:
                    self.sync(clone)
        moment = time.monotonic()
        if moment - self._last["rescan"] >= self.settings.rescan_s:
            self._last["rescan"] = moment
            self.rescan()
        if moment - self._last["poll"] >= self.settings.status_poll_s:
            self._last["poll"] = moment
            self.poll([c for c in self.clones.values() if c.launched])
        else:  # a clone that has said its last word, or was stopped, is about to exit
            self.poll([c for c in self.clones.values() if c.launched and (c.final_at or c.stop_at)])
        if moment - self._last["sweep"] >= self.settings.spare_sweep_s:
            self._last["sweep"] = moment
            self.spares.sweep(self._queued_folders())
        self.parts.stopper.check_deadlines(self.clones.values())
        scheduled.launch_due(self)
        self.launch_queued()

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
        self.current.config, self.current.paths = config, paths
        self.parts.limits.spent = None  # reckoned again against the new cap
        if config.spares != old.spares:
            self.spares.resize(config.spares)
        if config.retention != old.retention:
            self.parts.retention.wake.set()
        if (config.notify, config.dashboard) != (old.notify, old.dashboard):
            self.parts.recorder.renotify(config, paths)
        if self.on_config is not None:
            self.on_config(config, paths)

    # ------------------------------------------------------------------ following clones

    def recover(self) -> None:
        """At start: take up every active clone, and settle with the launcher what happened
        while no serve ran."""
        self.parts.limits.tell()  # none yet: what an earlier serve held back is not held now
        self.parts.recovery.recover()

    def rescan(self) -> None:
        self.follow_config(force=True)
        for clone_id in sorted(self.parts.cleanup.markers() - self.clones.keys()):
            with self.guard(clone_id):
                self.parts.recovery.track(clone_id)
        for clone in list(self.clones.values()):
            with self.guard(clone.id):
                self.sync(clone)

    def sync(self, clone: Clone) -> None:
        self.parts.progress.read(clone)
        marker = clone.folder.stop_marker()
        if marker is not None and clone.stop_at is None and clone.launched:
            self.parts.stopper.await_exit(clone)
        clone.stop_at = marker.at if marker is not None else None
        if clone.record.state is State.QUEUED and marker is not None:
            self.parts.stopper.stop_queued(clone, "before it started")
            return
        if clone.record.state is State.PREPARING and clone.record.launching_at is None:
            self.parts.launches.follow_preparation(clone, stopped=marker is not None)
        if clone.launched:
            deliver(clone)

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
                        self.parts.launches.finish(clone, status)
                    elif status.state is LaunchState.MISSING:
                        self.parts.launches.vanished(clone)
        except Exception:
            log.exception("cannot ask the launcher about its clones; trying again soon")

    # ------------------------------------------------------------------ the queue

    def launch_queued(self) -> None:
        """Queued clones start in request order, by the config file as it is now
        (serve/limits.py); each launch goes through `launch`."""
        self.follow_config()
        self.parts.limits.launch_queued(self.launch, self.sync, self.guard)

    # ------------------------------------------------------------------ what the parts share

    def launch(self, clone: Clone) -> None:
        """Launch a queued clone (serve/launching.py); a stop always wins over it."""
        self.parts.launches.launch(clone)

    def write(self, clone: Clone, record: Record, launch_failed: bool = False) -> None:
        """Every record serve writes goes through here (serve/recording.py)."""
        self.parts.recorder.write(clone, record, launch_failed)

    def spec(self, clone: Clone, network: NetworkMode = NetworkMode.OPEN) -> LaunchSpec:
        return self.parts.launches.spec(clone, network)

    def guard(self, clone_id: str) -> contextlib.AbstractContextManager[None]:
        """Only that clone is skipped if its files cannot be used (serve/sweeping.py)."""
        return self.parts.cleanup.guard(clone_id)

    def _forget(self, clone: Clone) -> None:
        self.parts.cleanup.forget(clone)

    def closing(self) -> bool:
        """Whether serve stops."""
        return self.feed.stopping.is_set()

    def wake(self, clone_ids: set[str]) -> None:
        """Have the loop look at these clones now (an empty set: at everything's timers)."""
        self.feed.wake(clone_ids)


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
            settings_of = LauncherSettings.of(config, paths.clones_dir, config.image)
            launcher = registry.launcher(config.launcher).factory(settings_of)
        launcher.check()
        for stray in launcher.reap_strays():
            log.info("removed %s, left behind by an earlier serve", stray)
        settings = settings or ServeSettings()
        dispatcher = None
        if config.notify.use:
            registry = registry or load_registry(config.plugins.disabled)
            dispatcher = make_dispatcher(config, paths, registry, settings.notify_backoff_s)
        relay = start_relay(launcher, paths.clones_dir)
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
            relay=relay.access if relay is not None else None,
        )
        try:
            server.run(stop_event, ready)
        finally:
            if relay is not None:
                relay.stop()
            follower.withdraw()
            if server.parts.recorder.dispatcher is not None:
                server.parts.recorder.dispatcher.close()
            dashboard.stop()
