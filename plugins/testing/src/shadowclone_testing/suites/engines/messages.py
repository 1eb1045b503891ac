"""The scenarios of the owner's messages sent while a turn runs."""

from __future__ import annotations

from shadowclone.plugin.types import Outcome, TextEvent, ToolUseEvent

from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.suites.engines.base import ScenarioBase
from shadowclone_testing.suites.engines.harness import Harness, send_and_time
from shadowclone_testing.suites.engines.processes import odd_sleep, wait_for_process
from shadowclone_testing.suites.engines.watch import Watch


class MessageScenarios(ScenarioBase):
    """A message mid-turn reaches the model in the same session, and the clone goes on."""

    async def test_a_message_while_the_model_streams_reaches_it(self, harness: Harness) -> None:
        harness.server.add(Text("word " * 400, chunk_delay_s=0.2))
        self.answer_the_message(harness)

        watch = await harness.launch("Write a long essay.")
        await harness.wait_for_request(lambda request: True)
        await send_and_time(harness, watch, self.MESSAGE, self.state("the model streaming"))
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()

        request = harness.server.wait_for_text(self.MESSAGE, timeout=1)
        assert request.last_user_text() == self.MESSAGE
        assert request.contains("Write a long essay."), "the message went to another session"
        await self.the_clone_goes_on(harness, watch)

    async def test_a_message_while_a_tool_runs_reaches_the_model(self, harness: Harness) -> None:
        # The odd duration marks the process to look for.
        sleep = odd_sleep(30)
        harness.server.add(Shell(f"echo started && {sleep} && echo over"))
        self.answer_the_message(harness)

        watch = await harness.launch("Run the slow build.")
        await watch.next(ToolUseEvent)
        await wait_for_process(sleep)
        await send_and_time(harness, watch, self.MESSAGE, self.state("a tool running"))
        # It reached the model before the 30 s command could end: no output of its end.
        assert not any(
            "over" in result
            for request in harness.server.model_requests()
            for result in request.tool_results()
        )
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()

        request = harness.server.wait_for_text(self.MESSAGE, timeout=1)
        assert request.last_user_text() == self.MESSAGE
        assert request.contains("Run the slow build."), "the message went to another session"
        await self.the_clone_goes_on(harness, watch)

    async def test_two_quick_messages_mid_turn_both_reach_the_model(self, harness: Harness) -> None:
        harness.server.add(Text("word " * 400, chunk_delay_s=0.2))
        second = "Owner says: and bump the version."
        harness.server.rule = lambda request: (
            Text("Heard both.")
            if request.contains(self.MESSAGE) and request.contains(second)
            else None
        )

        watch = await harness.launch("Write a long essay.")
        await harness.wait_for_request(lambda request: True)
        await watch.session.send(self.MESSAGE)
        await watch.session.send(second)
        await watch.next(TextEvent, lambda event: "Heard both." in event.text)
        await watch.turn_ended()

        assert harness.server.saw_text(self.MESSAGE)
        assert harness.server.saw_text(second)
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def the_clone_goes_on(self, harness: Harness, watch: Watch) -> None:
        """After a message the session still works: another turn, then a clean end."""
        harness.server.rule = None
        harness.server.add(Shell("echo more > more.txt"), Text("Went on."))
        await watch.session.send("Now write more.txt.")
        await watch.next(TextEvent, lambda event: "Went on." in event.text)
        await watch.turn_ended()
        assert (harness.workspace / "more.txt").read_text() == "more\n"
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail
