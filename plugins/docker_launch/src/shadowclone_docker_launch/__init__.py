"""The Docker launcher: clones run in containers of the clone image (R24)."""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.errors import PluginUnavailable
from shadowclone.plugin import Launcher, LauncherRegistration, hookimpl


def _launcher() -> Launcher:
    raise PluginUnavailable(
        "the docker launcher is not available yet in this version of shadowclone-docker-launch; "
        'use launcher = "fake" meanwhile'
    )


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="docker",
        summary="runs each clone in a Docker container of the clone image",
        factory=_launcher,
    )
