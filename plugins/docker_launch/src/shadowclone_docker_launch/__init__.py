"""The Docker launcher: clones run in containers of the clone image."""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import Launcher, LauncherRegistration, hookimpl


def _launcher() -> Launcher:
    from shadowclone.config import default_paths, load_config
    from shadowclone.errors import ConfigError

    from shadowclone_docker_launch.launcher import DockerLauncher

    try:
        config, paths = load_config()
    except ConfigError:
        return DockerLauncher(default_paths().clones_dir)  # check() then skips the image
    return DockerLauncher(paths.clones_dir, config.image)


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="docker",
        summary="runs each clone in a Docker container of the clone image",
        factory=_launcher,
    )
