"""The scenario suite against the real Claude Code CLI and the fake model server, and what is
particular to Claude Code: a message during a turn goes through an interrupt."""

from __future__ import annotations

from shadowclone.plugin import Engine, EngineTask, Outcome, TextEvent, TurnEndedEvent
from shadowclone_testing.fakes.models import ApiError, FakeModelServer, Text
from shadowclone_testing.suites.engine import EngineScenarios, Harness

from shadowclone_claude import shadowclone_engines
from shadowclone_claude.driver import engine_env


class TestClaude(EngineScenarios):
    engine_binaries = ("claude",)

    def make_engine(self) -> Engine:
        (registration,) = shadowclone_engines()
        return registration.factory()

    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key"}

    def ask_tool_timeout_s(self, task: EngineTask) -> float:
        # Claude Code's per-call MCP tool timeout, in milliseconds, from the driver's env.
        return int(engine_env(task, base={})["MCP_TOOL_TIMEOUT"]) / 1000

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
