"""The scenarios of the ask tool: the MCP slot, the owner's answer, a message, the wait limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from shadowclone.node.schemas import Answer, ChosenBy, ProgressKind, Question
from shadowclone.plugin.types import EngineLimits, EngineTask, Outcome, TextEvent, ToolUseEvent
from shadowclone.run.ask import DEFAULT_TIMEOUT_S, SERVER_NAME, TOOL_NAME, ask_command

from shadowclone_testing.fakes.models import CallTool, Text
from shadowclone_testing.suites.ask_stand_in import ANSWER_PREFIX
from shadowclone_testing.suites.engines.base import ScenarioBase
from shadowclone_testing.suites.engines.harness import Harness, send_and_time
from shadowclone_testing.suites.engines.progress import (
    deliver_answer,
    progress_lines,
    wait_for_progress,
    wait_for_progress_lines,
)

ASK_TOOL = f"mcp__{SERVER_NAME}__{TOOL_NAME}"
"""The ask tool as both drivers name it in a `ToolUseEvent`."""
SHORT_ASK_TIMEOUT_S = 4.0
"""The wait limit of the timeout scenario: a few seconds, so the recommended option is taken."""
LONG_ASK_TIMEOUT_S = 600.0
"""The wait limit where the owner answers: far longer than the scenario takes."""
ASK_TOOL_TIMEOUT_MARGIN_S = 30.0
"""How much longer than the ask's wait limit the engine must let the tool call run: the ask
server answers only after writing its answer line, and the engine's clock starts first."""


class AskScenarios(ScenarioBase):
    """Questions through the real `shadowclone_ask` server, and the engine's wait for them."""

    # ---- the shadowclone_ask MCP server slot

    async def test_an_mcp_tool_call_reaches_the_ask_server(self, harness: Harness) -> None:
        """The ask server is wired in under the name `shadowclone_ask`, and its tool's result
        comes back to the model (here the stand-in server; the ask scenarios follow below)."""
        harness.server.add(
            CallTool(
                "shadowclone_ask",
                "ask",
                {"question": "Squash?", "options": ["yes", "no"], "recommended": "no"},
            ),
            Text("Asked."),
        )

        watch = await harness.launch("Ask the owner whether to squash.")
        await watch.turn_ended()

        results = harness.server.model_requests()[-1].tool_results()
        assert any(f"{ANSWER_PREFIX}no" in result for result in results), results
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    # ---- the ask tool (the real `shadowclone.run.ask` server)

    QUESTION = "Drop the old migrations?"
    ASKED: ClassVar[dict[str, Any]] = {
        "question": QUESTION,
        "options": ["keep them", "drop them"],
        "recommended": "keep them",
    }

    async def test_a_question_reaches_the_owner_and_the_answer_reaches_the_model(
        self, harness: Harness
    ) -> None:
        harness.server.add(CallTool(SERVER_NAME, TOOL_NAME, self.ASKED), Text("Dropped them."))
        folder = harness.run_folder

        watch = await harness.launch_with_ask_server(
            "Clean up the migrations.", ask_timeout_s=LONG_ASK_TIMEOUT_S
        )
        asked = await wait_for_progress(folder, ProgressKind.QUESTION)

        assert asked.question == Question(
            id="q1",
            text=self.QUESTION,
            options=("keep them", "drop them"),
            recommended="keep them",
            timeout_s=LONG_ASK_TIMEOUT_S,
        )
        # The engine waits for the owner: no answer is settled and no tool result went back.
        assert progress_lines(folder, ProgressKind.ANSWER) == []
        assert not any(request.tool_results() for request in harness.server.model_requests())

        deliver_answer(folder, "q1", "drop them")
        await watch.turn_ended()

        (answered,) = progress_lines(folder, ProgressKind.ANSWER)
        assert answered.answer == Answer("q1", "drop them", ChosenBy.OWNER)
        results = harness.server.model_requests()[-1].tool_results()
        assert any(
            "The owner answered your question (q1): drop them" in result for result in results
        ), results
        assert "Dropped them." in watch.texts()
        (ask_use,) = [event for event in watch.seen(ToolUseEvent) if event.name == ASK_TOOL]
        assert self.QUESTION in ask_use.detail
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    async def test_a_message_while_a_question_is_open_reaches_the_model_at_once(
        self, harness: Harness
    ) -> None:
        """The open question is withdrawn and the model gets the owner's message now, not
        after the question's wait limit."""
        harness.server.add(CallTool(SERVER_NAME, TOOL_NAME, self.ASKED))
        self.answer_the_message(harness)
        folder = harness.run_folder

        watch = await harness.launch_with_ask_server(
            "Clean up the migrations.", ask_timeout_s=LONG_ASK_TIMEOUT_S
        )
        await wait_for_progress(folder, ProgressKind.QUESTION)
        await send_and_time(harness, watch, self.MESSAGE, self.state("a question open"))
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()
        (settled,) = await wait_for_progress_lines(folder, ProgressKind.ANSWER)
        assert settled.answer is not None
        assert settled.answer.chosen_by is ChosenBy.WITHDRAWN, settled
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_an_unanswered_question_takes_the_recommended_option(
        self, harness: Harness
    ) -> None:
        harness.server.add(CallTool(SERVER_NAME, TOOL_NAME, self.ASKED), Text("Kept them."))
        folder = harness.run_folder

        watch = await harness.launch_with_ask_server(
            "Clean up the migrations.", ask_timeout_s=SHORT_ASK_TIMEOUT_S, transport="stdio"
        )
        await watch.turn_ended()

        (asked,) = progress_lines(folder, ProgressKind.QUESTION)
        assert asked.question is not None
        assert asked.question.id == "q1"
        assert asked.question.timeout_s == SHORT_ASK_TIMEOUT_S
        (answered,) = progress_lines(folder, ProgressKind.ANSWER)
        assert answered.answer == Answer("q1", "keep them", ChosenBy.TIMEOUT)
        results = harness.server.model_requests()[-1].tool_results()
        (told,) = [result for result in results if "did not answer" in result]
        assert "your recommended option was taken: keep them" in told
        assert "skip every destructive step" in told
        assert "Kept them." in watch.texts()
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    @pytest.mark.parametrize("ask_timeout_s", [DEFAULT_TIMEOUT_S, 2 * 60 * 60.0])
    async def test_the_engine_lets_an_ask_wait_its_whole_limit(
        self, tmp_path: Path, ask_timeout_s: float
    ) -> None:
        """The engine's own MCP tool timeout, as the driver configures it, outlasts the ask's
        wait limit: the 30-minute default and a longer one."""
        task = EngineTask(
            workspace=tmp_path,
            prompt="Ask the owner.",
            ask_command=ask_command(tmp_path / "run", ask_timeout_s),
            env={},
            state_dir=tmp_path / "state",
            limits=EngineLimits(ask_timeout_s=ask_timeout_s),
        )
        assert self.ask_tool_timeout_s(task) >= ask_timeout_s + ASK_TOOL_TIMEOUT_MARGIN_S
