"""shadowclone's testing kit. As a plugin it offers the scripted engine, which follows a small
script instead of asking a model; with the fake launcher (shadowclone-fake-launch, which the kit
depends on and which runs each clone as a local process) it makes whole clones with no Docker
and no model, which the demo runs on.

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
    SecretProviderRegistration,
    hookimpl,
)


def _engine() -> Engine:
    from shadowclone_testing.scripted import ScriptedEngine

    return ScriptedEngine()


@hookimpl
def shadowclone_engines() -> Iterator[EngineRegistration]:
    yield EngineRegistration(
        name="scripted",
        summary="follows a fixed script instead of a model (tests and the demo)",
        factory=_engine,
        logins=("no-login",),
        # Where a script keeps a login it renews (the redaction tests rotate one there).
        credential_files=("credentials.json",),
    )


@hookimpl
def shadowclone_secret_providers() -> Iterator[SecretProviderRegistration]:
    yield SecretProviderRegistration(
        name="no-login",
        summary="no model login: for the scripted engine",
        engine="scripted",
        secrets=(),
    )
