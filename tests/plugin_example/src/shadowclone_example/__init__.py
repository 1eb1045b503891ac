"""An example shadowclone plugin: a review stage that refuses added `breakpoint()` calls, a
launcher that runs each clone as a local process (`launcher.py`), and an engine that drives a
small agent of its own (`engine.py`, `agent.py`).

docs/plugins.md walks through this file; tests/plugin/test_third_party.py installs it, and its
own tests (tests/plugin_example/tests) run the launcher contract of shadowclone-testing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

from shadowclone.plugin import (
    Engine,
    EngineRegistration,
    Launcher,
    LauncherRegistration,
    LauncherSettings,
    ReviewContext,
    ReviewResult,
    ReviewStage,
    ReviewStageRegistration,
    Secret,
    SecretProviderRegistration,
    hookimpl,
)


class NoBreakpoints:
    """Reads the clone's diff (it never runs the repository's code, so it may review anyone's)."""

    def run(self, context: ReviewContext) -> ReviewResult:
        diff = subprocess.run(
            ["git", "diff", context.base_ref, "--unified=0"],
            cwd=context.workspace,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        added = [
            line[1:].strip()
            for line in diff.splitlines()
            if line.startswith("+") and not line.startswith("+++") and "breakpoint()" in line
        ]
        if added:
            return ReviewResult("no-breakpoints", False, f"{len(added)} breakpoint() calls added")
        return ReviewResult("no-breakpoints", True, "no breakpoint() calls added")


def _stage() -> ReviewStage:
    return NoBreakpoints()


@hookimpl
def shadowclone_review_stages() -> Iterator[ReviewStageRegistration]:
    yield ReviewStageRegistration(
        name="no-breakpoints",
        summary="fails when the change adds a breakpoint() call",
        factory=_stage,
        order=50,
    )


def _launcher(settings: LauncherSettings) -> Launcher:
    from shadowclone_example.launcher import LocalLauncher

    return LocalLauncher(settings.clones_dir.parent / "example-local")


@hookimpl
def shadowclone_launchers() -> Iterator[LauncherRegistration]:
    yield LauncherRegistration(
        name="example-local",
        summary="runs each clone as a local process of yours (an example: no isolation)",
        factory=_launcher,
    )


def _engine() -> Engine:
    from shadowclone_example.engine import ExampleEngine

    return ExampleEngine()


@hookimpl
def shadowclone_engines() -> Iterator[EngineRegistration]:
    yield EngineRegistration(
        name="example-agent",
        summary="a small agent of this plugin's own on the Anthropic Messages API (an example)",
        factory=_engine,
        logins=("example-api-key",),
        base_url_env="EXAMPLE_AGENT_BASE_URL",
        default_base_url="https://api.anthropic.com",
    )


@hookimpl
def shadowclone_secret_providers() -> Iterator[SecretProviderRegistration]:
    yield SecretProviderRegistration(
        name="example-api-key",
        summary="an Anthropic API key for the example agent",
        engine="example-agent",
        secrets=(
            Secret(
                "example_agent_api_key",
                "An Anthropic API key for the example agent",
                env="EXAMPLE_AGENT_API_KEY",
            ),
        ),
    )
