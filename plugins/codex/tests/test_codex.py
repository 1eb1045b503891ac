"""The scenario suite against the real Codex CLI (`codex app-server`) and the fake model server,
and what is particular to Codex: a message during a turn steers it."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

import attrs
from shadowclone.plugin import (
    EarlyStart,
    Engine,
    EngineSession,
    EngineTask,
    KeepsSessions,
    Outcome,
    StartsEarly,
    TextEvent,
    TurnEndedEvent,
)
from shadowclone_testing.fakes.models import FAKE_MODEL, CallTool, FakeModelServer, Shell, Text
from shadowclone_testing.project_settings import codex_files, plant
from shadowclone_testing.suites.engine import EarlyStartScenarios, Harness, SessionScenarios, Watch

from shadowclone_codex import shadowclone_engines
from shadowclone_codex.config import ASK_SERVER, config_document

"""A model Codex has no metadata for. For its own default model (gpt-6.2-sol in 0.171.0) Codex
sends the tools as `additional_tools` input and offers only a JavaScript `exec` tool, which the
fake model server does not speak; for an unknown model it falls back to the plain Responses
tools (`exec_command`, MCP namespaces), as with any model behind a gateway."""


@attrs.frozen
class WithModel:
    """The registered engine, with a model for the tasks that name none."""

    engine: Engine
    model: str

    def _with_model(self, task: EngineTask) -> EngineTask:
        return attrs.evolve(task, model=task.model or self.model)

    async def launch(self, task: EngineTask) -> EngineSession:
        return await self.engine.launch(self._with_model(task))

    async def start_early(self, task: EngineTask) -> EarlyStart:
        assert isinstance(self.engine, StartsEarly)
        return EarlyWithModel(await self.engine.start_early(self._with_model(task)), self)

    def session_files(self, task: EngineTask, session_id: str) -> Sequence[str]:
        assert isinstance(self.engine, KeepsSessions)
        return self.engine.session_files(task, session_id)

    def session_place(self, task: EngineTask, session_id: str, name: str) -> str:
        assert isinstance(self.engine, KeepsSessions)
        return self.engine.session_place(task, session_id, name)


@attrs.frozen
class EarlyWithModel:
    early: EarlyStart
    engine: WithModel

    async def launch(self, task: EngineTask) -> EngineSession:
        return await self.early.launch(self.engine._with_model(task))

    async def discard(self) -> None:
        await self.early.discard()


def codex_engine() -> Engine:
    (registration,) = shadowclone_engines()
    return WithModel(registration.factory(), FAKE_MODEL)


def repository_config(workspace: Path) -> Path:
    """A repository's own `.codex/config.toml` with an MCP server that leaves a marker file
    when Codex starts it; returns the marker's path."""
    marker = workspace.parent / "repository-server-ran"
    (workspace / ".codex").mkdir()
    (workspace / ".codex" / "config.toml").write_text(
        f'[mcp_servers.from_the_repository]\ncommand = "/bin/sh"\nargs = ["-c", "touch {marker}"]\n'
    )
    return marker


class TestCodex(EarlyStartScenarios, SessionScenarios):
    engine_binaries = ("codex",)

    def make_engine(self) -> Engine:
        return codex_engine()

    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-fake-key"}

    def ask_tool_timeout_s(self, task: EngineTask) -> float:
        server = tomllib.loads(config_document(task))["mcp_servers"][ASK_SERVER]
        return float(server["tool_timeout_sec"])

    def plant_project_settings(self, workspace: Path, markers: Path) -> None:
        plant(workspace, codex_files(markers))

    async def test_a_message_mid_turn_steers_the_running_turn(self, harness: Harness) -> None:
        harness.server.add(Text("word " * 400, chunk_delay_s=0.2))
        self.answer_the_message(harness)

        watch = await harness.launch("Write a long essay.")
        await harness.wait_for_request(lambda request: True)
        await watch.session.send(self.MESSAGE)
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()

        # Steered, not interrupted: one turn, and the message is its last user message.
        assert watch.seen(TurnEndedEvent) == [TurnEndedEvent(interrupted=False)]
        request = harness.server.wait_for_text(self.MESSAGE, timeout=1)
        assert request.user_messages()[-2:] == [["Write a long essay."], [self.MESSAGE]]
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_web_search_is_offered_only_with_web_tools(self, harness: Harness) -> None:
        harness.server.add(Text("With web."), Text("Without web."))

        for web_tools in (True, False):
            watch = await harness.launch("Look around.", web_tools=web_tools)
            await watch.turn_ended()
            await watch.session.close()
            assert (await watch.finished()).outcome is Outcome.DONE

        with_web, without_web = (
            {tool.get("type") for tool in request.body["tools"]}
            for request in harness.server.model_requests()
        )
        assert "web_search" in with_web
        assert "web_search" not in without_web

    async def test_the_repository_s_own_codex_config_is_not_loaded(self, harness: Harness) -> None:
        """A repository under review must not start its own MCP servers (or hooks) in the
        clone: Codex would trust the checkout and load its `.codex/config.toml`."""
        marker = repository_config(harness.workspace)
        harness.server.add(Text("Looked."))

        watch = await harness.launch("Look at the repository.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        assert not marker.exists()
        tools = harness.server.model_requests()[0].tool_names()
        assert not any("from_the_repository" in tool for tool in tools), tools
        assert "mcp__shadowclone_ask.ask" in tools

    async def test_the_repository_s_agents_md_reaches_the_model_once(
        self, harness: Harness
    ) -> None:
        """The workspace is untrusted, so Codex would leave AGENTS.md out: the driver gives it,
        and Codex must not give it a second time."""
        (harness.workspace / "AGENTS.md").write_text("Marker 5b1c: run make check first.\n")
        harness.server.add(Text("Noted."))

        watch = await harness.launch("Fix the bug.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        [request] = harness.server.model_requests()
        texts = request.user_texts()
        assert sum("Marker 5b1c" in text for text in texts) == 1, texts
        assert request.last_user_text() == "Fix the bug."

    async def test_an_early_start_loads_neither_the_repository_s_config_nor_twice_its_agents_md(
        self, harness: Harness
    ) -> None:
        """Started early, the thread opens outside the workspace and its first turn moves it
        in: the repository's `.codex/` layer stays out then too, and AGENTS.md comes once."""
        marker = repository_config(harness.workspace)
        (harness.workspace / "AGENTS.md").write_text("Marker 3e8d: be brief.\n")
        harness.server.add(Shell("pwd"), Text("Looked."), Shell("pwd"), Text("Looked again."))
        engine = self.make_engine()
        assert isinstance(engine, StartsEarly)
        early = await engine.start_early(harness.task(""))

        watch = Watch(await early.launch(harness.task("Look at the repository.")))
        harness.watches.append(watch)
        await watch.turn_ended()
        await watch.session.send("And once more.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        assert not marker.exists()
        requests = harness.server.model_requests()
        for request in requests:
            assert not any("from_the_repository" in tool for tool in request.tool_names())
            assert sum("Marker 3e8d" in text for text in request.user_texts()) == 1
        # The first turn moved the thread into the workspace, and the next turn stays there.
        for after_pwd in (requests[1], requests[3]):
            assert str(harness.workspace.resolve()) in after_pwd.tool_results()[-1]

    async def test_a_failed_last_turn_fails_the_session(self, harness: Harness) -> None:
        # The fake server refuses to call a tool the request does not offer: Codex's request
        # fails, and so does the turn.
        harness.server.add(CallTool("no_such_server", "nothing"))

        watch = await harness.launch("Use the missing tool.")
        await watch.turn_ended()
        await watch.session.close()
        finished = await watch.finished()

        assert finished.outcome is Outcome.FAILED
        assert "no_such_server" in finished.detail
