"""The Docker launcher: clones run in containers of the clone image."""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import Launcher, LauncherRegistration, LauncherSettings, hookimpl


def _launcher(settings: LauncherSettings) -> Launcher:
    from shadowclone_docker_launch.launcher import DockerLauncher

    return DockerLauncher(settings.clones_dir, settings.image)


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="docker",
        summary="runs each clone in a Docker container of the clone image",
        factory=_launcher,
    )
