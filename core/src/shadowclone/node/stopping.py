"""`stop` and `resume`: the markers the owner writes for serve to act on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from shadowclone import files
from shadowclone.errors import Refused
from shadowclone.node.clones import Clones
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ResumeMarker, State, StopMarker
from shadowclone.node.views import CloneView, read_view

STOP_LOCK_TIMEOUT_S = 60.0
"""How long `stop` waits for a clone's launch (which holds its stop lock) to finish."""


class Stopping:
    def __init__(self, clones: Clones, clock: Callable[[], datetime]) -> None:
        self.clones = clones
        self.clock = clock

    def stop(self, clone_id: str) -> CloneView:
        """See `Node.stop`."""
        folder = self.clones.resolve(clone_id)
        try:
            with folder.stop_lock(timeout=STOP_LOCK_TIMEOUT_S):
                return self._stop(folder)
        except files.LockBusy:
            pass
        view = read_view(folder)
        if not view.state.active:
            raise Refused(f"clone {folder.id} has already ended: {view.state}")
        record = folder.record()
        launching = record is not None and (
            record.launching_at is not None or record.state.launched
        )
        if not launching:
            raise Refused(
                f"clone {folder.id}: its stop lock has been held for over "
                f"{STOP_LOCK_TIMEOUT_S:.0f} s, and not by a launch; try again"
            )
        return self._stop(folder)

    def _stop(self, folder: RunFolder) -> CloneView:
        view = read_view(folder)
        if not view.state.active:
            raise Refused(f"clone {folder.id} has already ended: {view.state}")
        if not view.stop_requested:
            folder.write_stop(StopMarker(at=self.clock()))
        return read_view(folder)

    def resume(self, clone_id: str) -> CloneView:
        """See `Node.resume`."""
        folder = self.clones.resolve(clone_id)
        view = read_view(folder)
        if view.state is not State.SCHEDULED:
            raise Refused(f"clone {folder.id} is {view.state}, not scheduled: nothing to resume")
        folder.write_resume(ResumeMarker(at=self.clock()))
        return read_view(folder)
