"""The scenarios of whole turns: a shell command, project settings, the end, closing."""

from __future__ import annotations

from pathlib import Path

import pytest
from shadowclone.plugin import Refused
from shadowclone.plugin.types import Outcome, ToolUseEvent, UsageEvent
from shadowclone.run.ask import SERVER_NAME

from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.project_settings import markers_left
from shadowclone_testing.suites.engines.base import ScenarioBase
from shadowclone_testing.suites.engines.harness import Harness


class TurnScenarios(ScenarioBase):
    """Turns that run, end and follow one another."""

    # ---- one turn

    async def test_a_turn_runs_a_shell_command_and_ends(self, harness: Harness) -> None:
        harness.server.add(Shell("echo hello > out.txt"), Text("I wrote out.txt."))

        watch = await harness.launch("Write hello into out.txt.")
        await watch.turn_ended()

        assert (harness.workspace / "out.txt").read_text() == "hello\n"
        assert any("out.txt" in event.detail for event in watch.seen(ToolUseEvent))
        assert "I wrote out.txt." in watch.texts()
        assert watch.seen(UsageEvent), "no usage reported for the turn"
        first, second = harness.server.model_requests()
        assert first.last_user_text() == "Write hello into out.txt."
        assert second.tool_results(), "the shell command's output never reached the model"

        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    async def test_without_project_settings_the_workspace_s_settings_run_nothing(
        self, harness: Harness, tmp_path: Path
    ) -> None:
        """`project_settings=False` (a head that is not the owner's): none of the workspace's
        hooks or MCP servers runs, through a whole session with a tool call, and the ask
        server is still offered."""
        markers = tmp_path / "markers"
        markers.mkdir()
        self.plant_project_settings(harness.workspace, markers)
        harness.server.add(Shell("echo looked"), Text("Looked."))

        watch = await harness.launch("Look at the repository.", project_settings=False)
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        assert markers_left(markers) == []
        assert any(SERVER_NAME in tool for tool in harness.server.model_requests()[0].tool_names())

    async def test_a_message_after_the_end_is_refused(self, harness: Harness) -> None:
        harness.server.add(Text("Done."))

        watch = await harness.launch("Say done.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        with pytest.raises(Refused):
            await watch.session.send("Too late.")

    async def test_a_message_between_turns_starts_the_next_turn(self, harness: Harness) -> None:
        harness.server.add(Text("First answer."), Text("Second answer."))

        watch = await harness.launch("First task.")
        await watch.turn_ended()
        await watch.session.send("Second task.")
        await watch.turn_ended()

        assert "Second answer." in watch.texts()
        last = harness.server.model_requests()[-1]
        assert last.last_user_text() == "Second task."
        assert last.contains("First task."), "the second turn is not in the same session"
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_close_during_a_turn_lets_the_turn_finish(self, harness: Harness) -> None:
        harness.server.add(Text("one two three four five six seven eight", chunk_delay_s=0.2))

        watch = await harness.launch("Count to eight.")
        await harness.wait_for_request(lambda request: True)
        await watch.session.close()

        await watch.turn_ended()
        assert "one two three four five six seven eight" in watch.texts()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail
