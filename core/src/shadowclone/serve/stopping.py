"""The one way serve stops a clone, whichever way the stop came.

A clone not launched yet that has a stop marker ends `stopped` in the queue and never
starts; a launched one is asked to exit by its launcher (once, on a thread of its own), and
serve watches it closely until it has. Every place in serve that meets a stop comes here,
so the rules stay in one place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from shadowclone.plugin.types import Launcher, LaunchState
from shadowclone.serve import records
from shadowclone.serve.clones import Clone, Forgets, ServeSettings, Writes

log = logging.getLogger(__name__)


class Stopper:
    """Stops clones: in the queue, as they launch, and once their grace is over."""

    def __init__(
        self,
        launcher: Launcher,
        settings: ServeSettings,
        *,
        wake: Callable[[set[str]], None],
        closing: Callable[[], bool],
        write: Writes,
        forget: Forgets,
        clock: Callable[[], datetime],
    ) -> None:
        self.launcher = launcher
        self.settings = settings
        self.wake = wake
        """Tells serve's loop which clones to look at now."""
        self.closing = closing
        """True once serve stops: the exit waiters give up."""
        self.write = write
        self.forget = forget
        self.clock = clock

    def stop_queued(self, clone: Clone, when: str) -> None:
        """A clone with a stop marker that was never launched: it ends `stopped` and never
        starts (`when` says at which point serve found the marker)."""
        log.info("clone %s was stopped %s", clone.id, when)
        self.write(clone, records.stopped_in_queue(clone.record, self.clock()))
        self.forget(clone)

    def stop_running(self, clone: Clone) -> None:
        """Ask the launcher to stop a launched clone, once: on a thread of its own, as the
        launcher's grace may take seconds."""
        if clone.stopping is not None:
            return
        clone.stopping = threading.Thread(
            target=self._stop, args=(clone.id,), name=f"stop {clone.id}", daemon=True
        )
        clone.stopping.start()

    def _stop(self, clone_id: str) -> None:
        try:
            self.launcher.stop(clone_id, grace_s=self.settings.kill_grace_s)
        except Exception:
            log.exception("the launcher could not stop clone %s", clone_id)

    def stopped_in_launch(self, clone: Clone) -> bool:
        """A stop written as the clone was launched (`stop` waited for the launch, or a serve
        died mid-launch): it has no work to save yet, so the launcher stops it now rather
        than after the stop grace."""
        marker = clone.folder.stop_marker()
        if marker is None:
            return False
        log.info("clone %s was stopped while it was launched; stopping it now", clone.id)
        clone.stop_at = marker.at
        self.stop_running(clone)
        self.await_exit(clone)
        return True

    def check_deadlines(self, clones: Iterable[Clone]) -> None:
        """A clone stopped (or finished) `stop_grace_s` ago that still runs is stopped by its
        launcher."""
        moment = self.clock()
        grace = timedelta(seconds=self.settings.stop_grace_s)
        for clone in clones:
            if not clone.launched or clone.stopping is not None or clone.waiting is not None:
                continue
            marks = [t for t in (clone.stop_at, clone.final_at) if t is not None]
            if not marks or moment - max(min(marks), clone.relaunched_at or min(marks)) < grace:
                continue
            why = "a stop marker" if clone.stop_at is not None else "its final line"
            log.info("clone %s still runs %s after %s; stopping it", clone.id, grace, why)
            self.stop_running(clone)

    def await_exit(self, clone: Clone) -> None:
        """Wake serve as soon as `clone`, which said its last word or was asked to stop, has
        exited (bounded by the time serve gives it before stopping it)."""
        clone_id = clone.id
        limit = self.settings.stop_grace_s + self.settings.kill_grace_s

        def wait() -> None:
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline and not self.closing():
                try:
                    state = self.launcher.status(clone_id).state
                except Exception:  # noqa: BLE001 - serve's own poll reports launcher trouble
                    return
                if state is not LaunchState.RUNNING:
                    self.wake({clone_id})
                    return
                time.sleep(self.settings.exit_poll_s)

        threading.Thread(target=wait, name=f"exit of {clone_id}", daemon=True).start()
