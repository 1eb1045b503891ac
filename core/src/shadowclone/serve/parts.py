"""serve's parts wired together: each is given, explicitly, what it needs of the others.

Kept out of the loop so `Server` stays the loop; every record still goes through
`Server.write` and every launch of a queued clone through `Server.launch`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from shadowclone.notify.dispatch import Dispatcher
from shadowclone.plugin.manager import Registry
from shadowclone.serve import scheduled
from shadowclone.serve.delivering import deliver
from shadowclone.serve.launching import Launches, LaunchHelpers
from shadowclone.serve.limits import LoginLimits
from shadowclone.serve.recording import ProgressReader, Recorder
from shadowclone.serve.retaining import Retention
from shadowclone.serve.stopping import Stopper
from shadowclone.serve.sweeping import Cleanup, Recovery, RecoveryHelpers

if TYPE_CHECKING:
    from shadowclone.serve.loop import Server


@attrs.frozen
class Parts:
    """serve's parts, each one place for one job, wired together by `Server`."""

    recorder: Recorder
    progress: ProgressReader
    cleanup: Cleanup
    stopper: Stopper
    launches: Launches
    recovery: Recovery
    limits: LoginLimits
    retention: Retention


def build_parts(server: Server, dispatcher: Dispatcher | None, registry: Registry | None) -> Parts:
    """Each part is given what it needs; records are always written by `server.write`."""
    current, launcher, settings, clock = (
        server.current,
        server.launcher,
        server.settings,
        server.clock,
    )
    recorder = Recorder(
        current.config,
        current.paths,
        clock=clock,
        dispatcher=dispatcher,
        registry=registry,
        backoff_s=settings.notify_backoff_s,
    )
    cleanup = Cleanup(current, launcher, server.clones, write=server.write, clock=clock)
    stopper = Stopper(
        launcher,
        settings,
        wake=server.wake,
        closing=server.closing,
        write=server.write,
        forget=cleanup.forget,
        clock=clock,
    )
    limits = LoginLimits(current, settings, server.clones, clock)
    progress = ProgressReader(
        write=server.write, overloaded=limits.overloaded, await_exit=stopper.await_exit
    )
    launches = Launches(
        current,
        launcher,
        settings,
        spares=server.spares,
        stopper=stopper,
        helpers=LaunchHelpers(
            write=server.write,
            forget=cleanup.forget,
            read_progress=progress.read,
            deliver=deliver,
            park=lambda clone, handoff: scheduled.park(server, clone, handoff),
            wake=server.wake,
            launch=server.launch,
        ),
        clock=clock,
        relay=server.relay,
    )
    recovery = Recovery(
        current,
        launcher,
        cleanup=cleanup,
        launches=launches,
        stopper=stopper,
        helpers=RecoveryHelpers(
            write=server.write,
            read_progress=progress.read,
            deliver=deliver,
            take_up=lambda clone, status: scheduled.take_up(server, clone, status),
        ),
        clock=clock,
    )
    retention = Retention(current, settings.retention_s)
    return Parts(recorder, progress, cleanup, stopper, launches, recovery, limits, retention)
