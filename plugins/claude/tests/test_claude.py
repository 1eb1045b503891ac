"""The scenario suite against the real Claude Code CLI and the fake model server, and what is
particular to Claude Code: a message during a turn goes through an interrupt."""

from __future__ import annotations

from pathlib import Path

from shadowclone.plugin import Engine, EngineTask, Outcome, TextEvent, TurnEndedEvent
from shadowclone_testing.fakes.models import ApiError, FakeModelServer, Shell, Text
from shadowclone_testing.project_settings import (
    CLAUDE_HOOK_EVENTS,
    claude_files,
    markers_left,
    plant,
)
from shadowclone_testing.suites.engine import Harness, SessionScenarios

from shadowclone_claude import shadowclone_engines
from shadowclone_claude.driver import engine_env


class TestClaude(SessionScenarios):
    engine_binaries = ("claude",)

    def make_engine(self) -> Engine:
        (registration,) = shadowclone_engines()
        return registration.factory()

    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key"}

    def ask_tool_timeout_s(self, task: EngineTask) -> float:
        # Claude Code's per-call MCP tool timeout, in milliseconds, from the driver's env.
        return int(engine_env(task, base={})["MCP_TOOL_TIMEOUT"]) / 1000

    def plant_project_settings(self, workspace: Path, markers: Path) -> None:
        plant(workspace, claude_files(markers))

    async def test_with_project_settings_the_workspace_s_hooks_run(
        self, harness: Harness, tmp_path: Path
    ) -> None:
        """The control of the suite's scenario without project settings: on the owner's own
        head Claude Code runs the repository's hooks (the repository's `.mcp.json` stays out
        all the same: `--strict-mcp-config`), and reads its CLAUDE.md."""
        markers = tmp_path / "markers"
        markers.mkdir()
        plant(harness.workspace, claude_files(markers))
        (harness.workspace / "CLAUDE.md").write_text("Marker 7f2a: be brief.\n")
        harness.server.add(Shell("echo looked"), Text("Looked."))

        watch = await harness.launch("Look at the repository.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        hooks = [f"claude-hook-{event}" for event in CLAUDE_HOOK_EVENTS]
        assert markers_left(markers) == sorted([*hooks, "claude-local-hook"])
        assert harness.server.model_requests()[0].contains("Marker 7f2a")

    async def test_without_project_settings_claude_md_is_not_read(self, harness: Harness) -> None:
        """`--setting-sources user` leaves out the project's memory files too."""
        (harness.workspace / "CLAUDE.md").write_text("Marker 7f2a: be brief.\n")
        (harness.workspace / "CLAUDE.local.md").write_text("Marker 9c41: be briefer.\n")
        harness.server.add(Text("Looked."))

        watch = await harness.launch("Look at the repository.", project_settings=False)
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        [request] = harness.server.model_requests()
        assert not request.contains("Marker 7f2a") and not request.contains("Marker 9c41")

    async def test_a_message_mid_turn_interrupts_and_starts_a_new_turn(
        self, harness: Harness
    ) -> None:
        harness.server.add(Text("word " * 400, chunk_delay_s=0.2))
        self.answer_the_message(harness)

        watch = await harness.launch("Write a long essay.")
        await harness.wait_for_request(lambda request: True)
        await watch.session.send(self.MESSAGE)
        await watch.next(TurnEndedEvent, lambda event: event.interrupted)
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()

        # Not folded into the running turn: the CLI recorded an interruption, and the message
        # is a user turn of its own after it.
        request = harness.server.wait_for_text(self.MESSAGE, timeout=1)
        (last_message,) = request.user_messages()[-1:]
        assert last_message[-1] == self.MESSAGE
        assert any("[Request interrupted by user" in text for text in request.user_texts())
        assert request.tool_results() == []
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_web_tools_off_and_the_model_reach_the_request(self, harness: Harness) -> None:
        harness.server.add(Text("Reviewed."))

        watch = await harness.launch("Review this.", web_tools=False, model="claude-test-model")
        await watch.turn_ended()

        (request,) = harness.server.model_requests()
        assert request.body["model"] == "claude-test-model"
        tools = request.tool_names()
        assert "Bash" in tools
        assert "WebFetch" not in tools
        assert "WebSearch" not in tools
        assert "mcp__shadowclone_ask__ask" in tools  # listed directly: ENABLE_TOOL_SEARCH=false
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_a_failed_last_turn_fails_the_session(self, harness: Harness) -> None:
        # Claude Code tries a refused request again: refuse every one.
        harness.server.rule = lambda request: ApiError("the fake model refuses this prompt")

        watch = await harness.launch("Do something.")
        await watch.turn_ended()
        await watch.session.close()
        finished = await watch.finished()

        assert finished.outcome is Outcome.FAILED
        assert "API Error: 400 the fake model refuses this prompt" in finished.detail
