"""shadowclone's fake launcher: each clone as a local process, with the folders a container
would see and no Docker (`launcher.py`; the keeper that outlives serve, `keeper.py`; the
engine's own user when run as root, `users.py`). For tests it can play a test script instead of
the run program (`scripts.py`, `player.py`). A distribution of its own so that the demo and
the tests find it through its entry point as owners find the Docker launcher, and the testing
kit depends on it, not the reverse."""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import Launcher, LauncherRegistration, LauncherSettings, hookimpl


def _launcher(settings: LauncherSettings) -> Launcher:
    """Its state (which clone runs where) is kept beside the default clones folder, or where
    SHADOWCLONE_FAKE_LAUNCH_DIR says: tests look there."""
    from shadowclone_fake_launch.launcher import FakeLauncher

    return FakeLauncher()


def _isolation() -> str:
    from shadowclone_fake_launch.users import isolation_note

    return isolation_note()


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="fake",
        summary="runs each clone as a local process (tests and the demo; no Docker); "
        + _isolation(),
        factory=_launcher,
    )
