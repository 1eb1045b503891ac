"""Launching a clone and following its launch to its end: the spec, the preparation, the
launch under the clone's stop lock, the next phase of a handoff, and the ending.

Kept apart from the loop so the stop-vs-launch rules (`launch`) read in one place; what it
needs of the rest of serve is passed in.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime

import attrs

from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.node.runfolder import FolderRemoved, RunFolder
from shadowclone.node.schemas import Handoff, ProgressKind, ProgressLine, Record, State, Step
from shadowclone.node.spares import spare_kind
from shadowclone.plugin import contract
from shadowclone.plugin.launcher_parts import PhasedLauncher, PreparingLauncher
from shadowclone.plugin.types import (
    CloneStatus,
    Launcher,
    LaunchSpec,
    NetworkMode,
)
from shadowclone.relay.server import RelayFor
from shadowclone.serve import records, sessions
from shadowclone.serve.clones import Clone, Current, Forgets, ServeSettings, Writes
from shadowclone.serve.spares import Spares
from shadowclone.serve.specs import launch_spec
from shadowclone.serve.stopping import Stopper

log = logging.getLogger(__name__)

LABEL_CLONE = contract.LABEL_CLONE
LABEL_TARGET = contract.LABEL_TARGET

MAX_HANDOFFS = 4
"""A clone is launched again for its next phase at most this often (a review takes two)."""

RECENT_CLONES = 50
"""How far back a starting serve looks for the kinds of clones to keep spares for."""


@attrs.frozen
class LaunchHelpers:
    """What launching needs of the rest of serve, each a callable of its own part."""

    write: Writes
    forget: Forgets
    read_progress: Callable[[Clone], None]
    deliver: Callable[[Clone], None]
    park: Callable[[Clone, Handoff], None]
    """Follows a clone that exited to wait for its login's usage limit (serve/scheduled.py)."""
    wake: Callable[[set[str]], None]
    launch: Callable[[Clone], None]
    """Launches a prepared clone: `Server.launch`, as for every queued clone."""


class Launches:
    """Launches clones and records how their launches end."""

    def __init__(
        self,
        current: Current,
        launcher: Launcher,
        settings: ServeSettings,
        *,
        spares: Spares,
        stopper: Stopper,
        helpers: LaunchHelpers,
        clock: Callable[[], datetime],
        relay: RelayFor | None = None,
    ) -> None:
        self.current = current
        self.relay = relay
        """Each clone's access to serve's relay, for a `RelayingLauncher`."""
        self.launcher = launcher
        self.settings = settings
        self.spares = spares
        self.stopper = stopper
        self.helpers = helpers
        self.clock = clock

    def launch(self, clone: Clone) -> None:
        """A stop always wins over a launch that has not begun. From its last look at the stop
        marker to its running record, the launch holds the clone's stop lock, which `stop`
        takes to write its marker: either the marker is there before the launch looks (the
        clone never starts: no `started_at`, no step, its issue free at once), or `stop`
        waits until the clone runs, says so, and the clone is stopped as any running one.
        `launching_at` is written under the lock too: outside it, a queued record with it
        set means a serve died mid-launch, which the next serve settles with the launcher."""
        spec = clone.prepared or self.spec(clone)
        if clone.prepared is None and (
            spec.environment is not None
            or (isinstance(self.launcher, PreparingLauncher) and self.launcher.needs_prepare(spec))
        ):
            self.prepare(clone, spec)
            return
        try:
            with clone.folder.stop_lock(timeout=self.settings.launch_lock_s):
                if not self._launch_unless_stopped(clone, spec):
                    return
        except files.LockBusy:
            log.warning("clone %s: a stop holds its stop lock; its launch waits", clone.id)
            return
        except FolderRemoved:
            log.info("clone %s was removed (stopped in the queue) before its launch", clone.id)
            self.helpers.forget(clone)
            return
        log.info("clone %s on %s is running", clone.id, clone.request.target.key)
        # Its image is made now: the next clone of its kind may wait in a spare of it.
        self.spares.launched(spare_kind(clone.request), attrs.evolve(spec, environment=None))
        self.helpers.read_progress(clone)
        if self.stopper.stopped_in_launch(clone):
            return
        self.helpers.deliver(clone)

    def _launch_unless_stopped(self, clone: Clone, spec: LaunchSpec) -> bool:
        """Under the clone's stop lock: launch it unless it has a stop marker; True if it
        runs now."""
        write = self.helpers.write
        if clone.folder.stop_marker() is not None:
            self.stopper.stop_queued(clone, "as it was about to launch; it never starts")
            return False
        moment = self.clock()
        write(clone, attrs.evolve(clone.record, launching_at=moment))
        sessions.give(self.current.paths, clone.folder, clone.request)
        try:
            self.launcher.launch(spec)
        except Exception as error:  # noqa: BLE001 - any launcher failure fails this clone only
            log.error("clone %s could not be launched: %s", clone.id, error)
            reason = f"launch failed: {error}"
            write(clone, records.failed(clone.record, reason, moment), launch_failed=True)
            self.helpers.forget(clone)
            return False
        write(
            clone,
            attrs.evolve(clone.record, state=State.RUNNING, started_at=moment, launching_at=None),
        )
        return True

    def prepare(self, clone: Clone, spec: LaunchSpec) -> None:
        """Have the launcher make ready what the clone needs (its environment's image) on a
        thread of its own; the clone is `preparing` meanwhile and holds its slot. The state
        is written before the stop marker is read, as `launch` does with `launching_at`."""
        self.helpers.write(clone, attrs.evolve(clone.record, state=State.PREPARING))
        if clone.folder.stop_marker() is not None:
            self.stopper.stop_queued(clone, "as it was about to launch; it never starts")
            return
        log.info("clone %s on %s is being prepared", clone.id, clone.request.target.key)
        future: Future[LaunchSpec] = Future()
        clone.preparing = future
        folder, clone_id, cancel, wake = clone.folder, clone.id, clone.cancel, self.helpers.wake

        def say(text: str) -> None:
            line = ProgressLine(Step.PREPARE, ProgressKind.NOTE, text)
            folder.append_progress(records.scrubbed_line(line))

        def run() -> None:
            try:
                future.set_result(self.launcher.prepare(spec, say, cancel))
            except BaseException as error:  # noqa: BLE001 - handed to serve's loop
                future.set_exception(error)
            finally:
                wake({clone_id})

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
            self.stopper.stop_queued(clone, "while it was being prepared")
            return
        try:
            spec = future.result()
        except Exception as error:  # noqa: BLE001 - any failure fails this clone only
            log.error("clone %s could not be prepared: %s", clone.id, error)
            reason = f"its launch could not be prepared: {error}"
            failed = records.failed(clone.record, reason, self.clock())
            self.helpers.write(clone, failed, launch_failed=True)
            self.helpers.forget(clone)
            return
        clone.prepared = spec
        image = spec.image if spec.image != clone.request.image else None
        self.helpers.write(clone, attrs.evolve(clone.record, image=image))
        self.helpers.launch(clone)

    def spec(self, clone: Clone, network: NetworkMode = NetworkMode.OPEN) -> LaunchSpec:
        return launch_spec(self.current, clone, network, self.relay)

    # ------------------------------------------------------------------ endings

    def finish(self, clone: Clone, status: CloneStatus) -> None:
        """The launcher says the clone exited: record how, then let it go; or, if it
        handed its work on to a next phase, launch that."""
        self.helpers.read_progress(clone)
        if clone.final_at is None and self.hand_on(clone, status):
            return
        stop_requested = clone.folder.stop_marker() is not None
        record = records.ended(clone.record, status, stop_requested, self.clock())
        sessions.remember(self.current.paths, clone.folder, clone.request, record)
        self.helpers.write(clone, record)
        log.info(
            "clone %s ended %s (exit code %s)%s",
            clone.id,
            record.state,
            record.exit_code,
            f": {record.reason}" if record.reason else "",
        )
        self.helpers.forget(clone)

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
            self.helpers.park(clone, handoff)
            return True
        if clone.record.handoffs >= MAX_HANDOFFS:
            log.error("clone %s asked for more than %d phases", clone.id, MAX_HANDOFFS)
            return False
        log.info(
            "clone %s goes on to %s with the network %s", clone.id, handoff.resume, handoff.network
        )
        try:
            if isinstance(self.launcher, PhasedLauncher):  # keeps what the clone's life holds
                self.launcher.end_phase(clone.id)
            else:
                self.launcher.remove(clone.id)
            self.launcher.launch(self.spec(clone, handoff.network))
        except Exception as error:  # noqa: BLE001 - any launcher failure fails this clone only
            reason = f"launch of its {handoff.resume} phase failed: {error}"
            self.helpers.write(clone, records.failed(clone.record, reason, self.clock()))
            self.helpers.forget(clone)
            return True
        self.helpers.write(clone, attrs.evolve(clone.record, handoffs=clone.record.handoffs + 1))
        return True

    def vanished(self, clone: Clone) -> None:
        log.error("clone %s was running and its launcher no longer knows it", clone.id)
        reason = "vanished: the launcher has no trace of this clone"
        self.helpers.write(clone, records.failed(clone.record, reason, self.clock()))
        self.helpers.forget(clone)


def recent_kinds(
    current: Current, spares: Spares, spec: Callable[[Clone], LaunchSpec]
) -> list[tuple[str, LaunchSpec]]:
    """The kinds of the clones requested last (up to `spares`, among the last
    `RECENT_CLONES`), each with the spec its next clone would launch with: a serve that
    starts has them ready as if it had launched those clones itself."""
    from shadowclone.node.index import CloneIndex

    found: dict[str, LaunchSpec] = {}
    if not spares.possible:
        return []
    for clone_id in itertools.islice(CloneIndex(current.paths.clones_dir).newest(), RECENT_CLONES):
        folder = RunFolder(current.paths.clones_dir / clone_id)
        try:
            request = folder.request()
        except (OSError, MalformedFile):
            continue  # gone, a start under way, or unreadable: only a spare is lost
        kind = spare_kind(request)
        if kind in found or request.launcher != current.config.launcher:
            continue
        if request.environment is not None:
            continue  # its image is known once a launch has prepared it
        record = Record(id=clone_id, state=State.QUEUED)
        found[kind] = spec(Clone(folder=folder, request=request, record=record))
        if len(found) >= current.config.spares:
            break
    return list(found.items())
