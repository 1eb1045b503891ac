"""The swarm launcher: each clone runs as a one-replica service of the clone image on a Docker
Swarm of the owner's machines, never restarted."""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import Launcher, LauncherRegistration, LauncherSettings, hookimpl


def _launcher(settings: LauncherSettings) -> Launcher:
    from shadowclone_swarm_launch.launcher import SwarmLauncher
    from shadowclone_swarm_launch.settings import SwarmSettings

    return SwarmLauncher(
        settings.clones_dir, settings.image, settings=SwarmSettings.read(settings.options)
    )


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="swarm",
        summary="runs each clone as a one-replica service on a Docker Swarm of your machines",
        factory=_launcher,
    )
