"""shadowclone's testing kit. As a plugin it offers the fake launcher and the scripted engine:
whole clones with no Docker and no model (the demo runs on them). The fake launcher runs the
run program as a local process with the folders a container would see; the scripted engine
follows a small script instead of asking a model.

For tests it ships the fakes (`fakes.github`, `fakes.models`), the contract suites a plugin's
tests subclass (`suites.engine`, `suites.launcher`), the pytest plugin with the `sc_`
fixtures (`pytest_plugin`, which a project's rootdir conftest opts in to with
`pytest_plugins = ["shadowclone_testing.pytest_plugin"]`) and the helpers tests share
(`harness`, `serving`, `containers`, `hostile`, `web`, `mcp_client`, `installs`, `owner`).
"""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import (
    Engine,
    EngineRegistration,
    Launcher,
    LauncherRegistration,
    LauncherSettings,
    SecretProviderRegistration,
    hookimpl,
)


def _launcher(settings: LauncherSettings) -> Launcher:
    """Its state (which clone runs where) is kept beside the default clones folder, or where
    SHADOWCLONE_FAKE_LAUNCH_DIR says: tests look there."""
    from shadowclone_testing.launcher import FakeLauncher

    return FakeLauncher()


def _isolation() -> str:
    from shadowclone_testing.users import isolation_note

    return isolation_note()


def _engine() -> Engine:
    from shadowclone_testing.scripted import ScriptedEngine

    return ScriptedEngine()


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="fake",
        summary="runs each clone as a local process (tests and the demo; no Docker); "
        + _isolation(),
        factory=_launcher,
    )


@hookimpl
def shadowclone_engines() -> Iterator[EngineRegistration]:
    yield EngineRegistration(
        name="scripted",
        summary="follows a fixed script instead of a model (tests and the demo)",
        factory=_engine,
        logins=("no-login",),
    )


@hookimpl
def shadowclone_secret_providers() -> Iterator[SecretProviderRegistration]:
    yield SecretProviderRegistration(
        name="no-login",
        summary="no model login: for the scripted engine",
        engine="scripted",
        secrets=(),
    )
