"""The example engine passes the engine scenarios of shadowclone-testing against its agent and
the kit's fake model server, run from an installed kit as a third party runs it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from shadowclone.plugin import Engine, EngineTask
from shadowclone_example import shadowclone_engines
from shadowclone_example.engine import engine_env
from shadowclone_testing.fakes.models import FakeModelServer
from shadowclone_testing.project_settings import all_files, plant
from shadowclone_testing.suites.engine import EngineScenarios


class TestExampleAgent(EngineScenarios):
    engine_binaries = ("shadowclone-example-agent",)

    @pytest.fixture
    def sc_engines_on_path(self, monkeypatch: pytest.MonkeyPatch) -> Path:
        """The agent is a script of this environment, not in a folder of engine CLIs."""
        scripts = Path(sys.executable).parent
        monkeypatch.setenv("PATH", f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
        return scripts

    def make_engine(self) -> Engine:
        (registration,) = shadowclone_engines()
        return registration.factory()

    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        return {"EXAMPLE_AGENT_BASE_URL": server.url, "EXAMPLE_AGENT_API_KEY": "fake-key"}

    def ask_tool_timeout_s(self, task: EngineTask) -> float:
        return float(engine_env(task, base={})["EXAMPLE_AGENT_TOOL_TIMEOUT_S"])

    def plant_project_settings(self, workspace: Path, markers: Path) -> None:
        # The agent reads no settings of the workspace's; no other engine's may run either.
        plant(workspace, all_files(markers))
