"""Clones scheduled out of their launcher: a long wait for a login's usage limit.

A clone whose login's usage limit resets further away than `Request.long_wait_s` keeps its
engine's session, writes a handoff (`Resume.SESSION`, `not_before` the reset) and exits 0, so
that nothing of it runs while it waits. serve then removes what its launcher kept of it (the
exited container) and follows the clone with no launch at all: its record stays `scheduled`
(`scheduled_until`), its login's queue stays held, messages go on being delivered to its
deliveries file, and the launcher's word that it has no such clone means nothing. The clone
is launched again (the same spec) when the reset comes, at once when the owner resumes it
(a resume marker written at or after the handoff's `at`), and at once when the owner stops it:
that launch takes the stop, starts no engine and saves the work as any stopped clone does.

The handoff file is the truth: a serve that starts finds a clone with that handoff and no
running launch waiting again, whatever it did before it stopped; the launch deletes the file
when it starts.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from shadowclone.errors import MalformedFile
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Handoff, State
from shadowclone.plugin.types import CloneStatus, LaunchState
from shadowclone.serve import records

if TYPE_CHECKING:
    from shadowclone.serve.clones import Clone
    from shadowclone.serve.loop import Server

log = logging.getLogger(__name__)


def waiting(folder: RunFolder) -> Handoff | None:
    """The handoff of a clone that exited to wait for its login's usage limit, if it is one
    (an unreadable handoff is none: the ending that follows says why)."""
    try:
        handoff = folder.handoff()
    except MalformedFile:
        return None
    return handoff if handoff is not None and handoff.waits else None


def due(folder: RunFolder, handoff: Handoff, moment: datetime) -> str | None:
    """Why the waiting clone is launched again now, or None while it waits on."""
    if folder.stop_marker() is not None:
        return "the owner stopped it"
    marker = folder.resume_marker()
    if marker is not None and marker.at >= handoff.at:
        return "the owner resumed it"
    if handoff.not_before is None or moment >= handoff.not_before:
        return "its login's usage limit has reset"
    return None


def park(server: Server, clone: Clone, handoff: Handoff) -> None:
    """The clone exited to wait for its login's usage limit: free what its launcher kept of
    it and follow it with nothing running until it is due (`launch_due`)."""
    clone.waiting = handoff
    record = clone.record
    if record.state is not State.SCHEDULED or record.scheduled_until is None:
        until = record.scheduled_until or handoff.not_before
        server.write(clone, attrs.evolve(record, state=State.SCHEDULED, scheduled_until=until))
    when = handoff.not_before.isoformat() if handoff.not_before else "now"
    log.info("clone %s waits, nothing running, for its login's reset at %s", clone.id, when)
    _remove(server, clone.id)


def take_up(server: Server, clone: Clone, status: CloneStatus) -> bool:
    """At serve's start: a launched clone the launcher has not running, and that exited to
    wait, waits on (True) rather than being read as vanished or ended."""
    if status.state is LaunchState.RUNNING or not clone.launched:
        return False
    if status.state is LaunchState.EXITED and status.exit_code != 0:
        return False
    handoff = waiting(clone.folder)
    if handoff is None:
        return False
    park(server, clone, handoff)
    return True


def launch_due(server: Server) -> None:
    """Launch again each waiting clone that is due: its reset came, or the owner resumed or
    stopped it."""
    moment = server.clock()
    for clone in list(server.clones.values()):
        handoff = clone.waiting
        if handoff is None:
            continue
        with server.guard(clone.id):
            why = due(clone.folder, handoff, moment)
            if why is not None:
                relaunch(server, clone, handoff, why)


def relaunch(server: Server, clone: Clone, handoff: Handoff, why: str) -> None:
    """Launch the waiting clone again with the spec of its phase; it resumes the session (or,
    stopped, saves its work)."""
    log.info("clone %s is launched again: %s", clone.id, why)
    clone.waiting = None
    clone.relaunched_at = server.clock()
    try:
        _remove(server, clone.id)
        server.launcher.launch(server.spec(clone, handoff.network))
    except Exception as error:  # noqa: BLE001 - any launcher failure fails this clone only
        reason = f"its launch to resume its engine's session failed: {error}"
        server.write(clone, records.failed(clone.record, reason, server.clock()))
        server._forget(clone)


def _remove(server: Server, clone_id: str) -> None:
    try:
        if server.launcher.status(clone_id).state is not LaunchState.MISSING:
            server.launcher.remove(clone_id)
    except Exception:
        log.exception("the launcher could not remove what it kept of clone %s", clone_id)
