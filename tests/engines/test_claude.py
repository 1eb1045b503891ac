"""The scenario suite against the real Claude Code CLI and the fake model server."""

from __future__ import annotations

from shadowclone.fakes.models import FakeModelServer
from shadowclone.plugin.types import Engine
from shadowclone_claude import shadowclone_engines

from tests.engines.scenarios import EngineScenarios


class TestClaude(EngineScenarios):
    engine_binaries = ("claude",)

    def make_engine(self) -> Engine:
        (registration,) = shadowclone_engines()
        return registration.factory()

    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key"}
