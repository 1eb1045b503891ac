"""The base of the engine scenarios: what a subclass says and the fixtures every group uses."""

from __future__ import annotations

import abc
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin.types import Engine, EngineTask

from shadowclone_testing.fakes.models import FakeModelServer, Text
from shadowclone_testing.suites.engines.harness import STAND_IN_ASK_SERVER, Harness, git_workspace


class ScenarioBase(abc.ABC):
    """What every group of scenarios needs: the abstract methods an engine's test module
    implements, the defaults it may override, the owner's message and the fixtures."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.engines, pytest.mark.anyio]

    engine_binaries: ClassVar[tuple[str, ...]]
    """The CLIs the engine runs, looked up in tools/engines (the fixture `sc_engines_on_path`)."""

    @abc.abstractmethod
    def make_engine(self) -> Engine:
        """The engine under test, built the way the core builds it (its registration factory)."""

    @abc.abstractmethod
    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        """The variables that point the engine at `server` and log it in (a fake key)."""

    def state(self, what: str) -> str:
        """`what` the engine was doing, named with the engine, for the send-to-model figures."""
        return f"{self.engine_binaries[0]}, {what}"

    def ask_command(self) -> tuple[str, ...]:
        """argv of the `shadowclone_ask` MCP server the scenarios give the engine by default
        (the ask scenarios start the real one through `Harness.launch_with_ask_server`)."""
        return (sys.executable, str(STAND_IN_ASK_SERVER))

    def ask_tool_timeout_s(self, task: EngineTask) -> float:
        """How long the engine lets one call of the ask tool run for `task`, read through the
        driver's own helpers (the environment or config file it builds). Every engine's test
        module says it; this default fails the check so that none forgets."""
        pytest.fail(
            f"{type(self).__name__} does not say how long its engine lets the ask tool run: "
            "override ask_tool_timeout_s with the driver's own helpers"
        )

    def plant_project_settings(self, workspace: Path, markers: Path) -> None:
        """Write into `workspace` the engine's own project settings (hooks, MCP servers...) that
        would each run a command leaving a file in `markers` if the engine loaded them: the
        files a stranger's pull request could add. Every engine's test module says it; this
        default fails the check so that none forgets."""
        pytest.fail(
            f"{type(self).__name__} does not say what project settings its engine loads: "
            "override plant_project_settings with files that would run a command"
        )

    # ---- the owner's message, sent by the message and the ask scenarios

    MESSAGE = "Owner says: also add a CHANGELOG entry."

    def answer_the_message(self, harness: Harness) -> None:
        """From the moment the owner's message reaches the model, it answers "Heard you"."""
        harness.server.rule = lambda request: (
            Text("Heard you.") if request.contains(self.MESSAGE) else None
        )

    # ---- fixtures

    @pytest.fixture
    def anyio_backend(self) -> str:
        """The drivers use asyncio subprocesses."""
        return "asyncio"

    @pytest.fixture
    def model_server(self) -> Iterator[FakeModelServer]:
        with FakeModelServer() as server:
            yield server

    @pytest.fixture
    async def harness(
        self, sc_engines_on_path: Path, model_server: FakeModelServer, tmp_path: Path
    ) -> AsyncIterator[Harness]:
        harness = Harness(
            engine=self.make_engine(),
            server=model_server,
            workspace=git_workspace(tmp_path / "workspace"),
            state_dir=tmp_path / "state",
            # A home of its own, as the run program gives the engine: the shell tools must not
            # run this machine's login shell setup (pyenv's rehash takes a lock, and a killed
            # command leaves it behind for every later shell).
            env={**self.provider_env(model_server), "HOME": str(tmp_path / "home")},
            ask_command=self.ask_command(),
            run_folder=RunFolder(tmp_path / "run"),
        )
        harness.state_dir.mkdir()
        harness.run_folder.path.mkdir()
        (tmp_path / "home").mkdir()
        try:
            yield harness
        finally:
            await harness.aclose()
