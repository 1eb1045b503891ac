"""Finding clones and cleaning up after them: what serve takes up at start (recovery), and
how it lets go of a clone that ended or that it cannot follow (cleanup).

The files are the truth, so a serve that starts, however the last one ended, settles every
active clone with its launcher here; and every clone serve drops leaves by `Cleanup.forget`
or `Cleanup.release`, which remove its active marker and what its launcher kept.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime

import attrs

from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.node.ids import is_clone_id
from shadowclone.node.runfolder import RunFolder, run_folders
from shadowclone.node.schemas import Record, State
from shadowclone.plugin.types import CloneStatus, Launcher, LaunchState
from shadowclone.serve import records
from shadowclone.serve.clones import Clone, Current, Writes
from shadowclone.serve.launching import Launches
from shadowclone.serve.stopping import Stopper

log = logging.getLogger(__name__)


class Cleanup:
    """Lets clones go, and keeps serve going past a clone whose files it cannot use."""

    def __init__(
        self,
        current: Current,
        launcher: Launcher,
        clones: dict[str, Clone],
        *,
        write: Writes,
        clock: Callable[[], datetime],
    ) -> None:
        self.current = current
        self.launcher = launcher
        self.clones = clones
        """serve's own map of the clones it follows, shared: forgetting one drops it there."""
        self.write = write
        self.clock = clock
        self.skipped: dict[str, str] = {}
        """Clones serve cannot follow (a run-folder file it cannot read or write), by id, with
        why: each is reported once, and every other clone goes on."""

    def forget(self, clone: Clone) -> None:
        """Only once the ending is written: drop the active marker, then the launcher's copy."""
        self.clones.pop(clone.id, None)
        self.release(clone.id)

    def release(self, clone_id: str) -> None:
        try:
            files.remove(self.current.paths.active_dir / clone_id)
        except MalformedFile as error:
            self.report(f"{clone_id} marker", f"clone {clone_id}: {error}")
        try:
            if self.launcher.status(clone_id).state is not LaunchState.MISSING:
                self.launcher.remove(clone_id)
        except Exception:
            log.exception("the launcher could not remove clone %s", clone_id)

    def end_untracked(self, folder: RunFolder, reason: str) -> None:
        try:
            record = folder.record()
        except MalformedFile:
            record = None
        if record is None or record.state.active:
            base = record or Record(id=folder.id, state=State.QUEUED)
            folder.write_record(records.scrubbed(records.failed(base, reason, self.clock())))
        self.release(folder.id)

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
        self.release(clone_id)

    def markers(self) -> set[str]:
        """The ids of the active markers (none, reported, if they cannot be read)."""
        active_dir = self.current.paths.active_dir
        try:
            files.check_plain_folder(active_dir)
            return {n for n in os.listdir(active_dir) if is_clone_id(n)}
        except FileNotFoundError:
            return set()
        except (MalformedFile, OSError) as error:
            self.report("active", f"cannot read the active markers: {error}")
            return set()


@attrs.frozen
class RecoveryHelpers:
    """What taking up clones needs of the rest of serve, each a callable of its own part."""

    write: Writes
    read_progress: Callable[[Clone], None]
    deliver: Callable[[Clone], None]
    take_up: Callable[[Clone, CloneStatus], bool]
    """True for a clone that exited to wait for its login's usage limit (serve/scheduled.py)."""


class Recovery:
    """Takes up clones: every active one at start, settled with the launcher, and each new
    one as it appears."""

    def __init__(
        self,
        current: Current,
        launcher: Launcher,
        *,
        cleanup: Cleanup,
        launches: Launches,
        stopper: Stopper,
        helpers: RecoveryHelpers,
        clock: Callable[[], datetime],
    ) -> None:
        self.current = current
        self.launcher = launcher
        self.cleanup = cleanup
        self.clones = cleanup.clones
        self.launches = launches
        self.stopper = stopper
        self.helpers = helpers
        self.clock = clock

    def recover(self) -> None:
        """At start: take up every active clone, and settle with the launcher what happened
        while no serve ran."""
        guard = self.cleanup.guard
        try:
            files.make_folder(self.current.paths.active_dir)
        except MalformedFile as error:
            log.error("%s; clones are found by their run folders alone", error)
        for clone_id in sorted(self._candidates()):
            with guard(clone_id):
                self.track(clone_id)
        known = {status.clone_id: status for status in self.launcher.running()}
        for clone in list(self.clones.values()):
            with guard(clone.id):
                self.reconcile(clone, known.get(clone.id) or self.launcher.status(clone.id))
        for clone_id, status in known.items():
            if clone_id not in self.clones:
                with guard(clone_id):
                    self.settle_orphan(clone_id, status)

    def _candidates(self) -> set[str]:
        """Active markers, and (once, at start) every run folder whose record is missing or
        active: a marker may have been removed by admission for a stopped queued clone."""
        ids = self.cleanup.markers()
        for folder in run_folders(self.current.paths.clones_dir):
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

    def track(self, clone_id: str) -> Clone | None:
        """Start following a clone, writing its first record if it has none; None for a
        clone that is not (or no longer) active."""
        folder = RunFolder(self.current.paths.clones_dir / clone_id)
        try:
            request = folder.request()
        except FileNotFoundError:
            return None  # a start in progress, or a marker left by a start that died
        except MalformedFile as error:
            log.error("clone %s cannot run: %s", clone_id, error)
            self.cleanup.end_untracked(folder, str(error))
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
            self.cleanup.release(clone_id)
            return None
        clone = Clone(folder=folder, request=request, record=record)
        delivered, _, clone.deliveries_offset = folder.deliveries()
        clone.delivered = {line.id for line in delivered}
        self.clones[clone_id] = clone
        self.helpers.read_progress(clone)
        return clone

    def reconcile(self, clone: Clone, status: CloneStatus) -> None:
        """Settle one clone with its launcher's word, after a restart."""
        write = self.helpers.write
        if clone.record.state is State.PREPARING:
            # Its preparation ended with the serve that ran it: it is prepared again (an image
            # built meanwhile is found by its tag), unless the launch had begun.
            log.info("clone %s was being prepared when serve stopped; it is queued", clone.id)
            write(clone, attrs.evolve(clone.record, state=State.QUEUED))
        record = clone.record
        if record.state is State.QUEUED:
            if status.state is LaunchState.MISSING:
                if record.launching_at is not None:
                    log.info("clone %s never reached its launcher; it stays queued", clone.id)
                    write(clone, attrs.evolve(record, launching_at=None))
                return
            log.info("clone %s was launched before serve stopped; following it", clone.id)
            started = record.launching_at or self.clock()
            write(
                clone,
                attrs.evolve(record, state=State.RUNNING, started_at=started, launching_at=None),
            )
            self.helpers.read_progress(clone)
            if status.state is LaunchState.RUNNING and self.stopper.stopped_in_launch(clone):
                return
        if self.helpers.take_up(clone, status):
            return
        if status.state is LaunchState.MISSING:
            self.launches.vanished(clone)
        elif status.state is LaunchState.EXITED:
            self.launches.finish(clone, status)
        else:
            self.helpers.deliver(clone)

    def settle_orphan(self, clone_id: str, status: CloneStatus) -> None:
        """A clone the launcher has and serve does not follow: ended ones are removed; one
        with no run folder here is left alone (it may belong to another clones folder)."""
        clones_dir = self.current.paths.clones_dir
        folder = RunFolder(clones_dir / clone_id)
        if not folder.exists():
            log.warning(
                "the launcher has clone %s (%s), which has no run folder in %s; leaving it",
                clone_id,
                status.state,
                clones_dir,
            )
            return
        self.cleanup.release(clone_id)
