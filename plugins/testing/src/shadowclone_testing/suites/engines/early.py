"""The scenarios of an engine that starts before its workspace exists (`StartsEarly`)."""

from __future__ import annotations

import asyncio
import subprocess

import attrs
import psutil
import pytest
from shadowclone.plugin.types import Outcome, StartsEarly

from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.suites.engines.harness import Harness
from shadowclone_testing.suites.engines.processes import engine_processes, still_running
from shadowclone_testing.suites.engines.scenarios import EngineScenarios
from shadowclone_testing.suites.engines.watch import STOP_TIMEOUT_S, Watch


class EarlyStartScenarios(EngineScenarios):
    """The scenarios of an engine that can also start before its workspace exists
    (`StartsEarly`): subclass this instead of `EngineScenarios`. The run program starts such an
    engine while it still reads the target and clones the workspace, then launches the task in
    the program already running."""

    def starts_early(self, harness: Harness) -> StartsEarly:
        engine = harness.engine
        assert isinstance(engine, StartsEarly), f"{type(engine).__name__} does not start early"
        return engine

    async def test_an_early_start_works_in_the_workspace_made_after_it(
        self, harness: Harness
    ) -> None:
        later = harness.workspace.parent / "made-later"
        early_task = harness.task("", workspace=later)
        early = await self.starts_early(harness).start_early(early_task)
        # What the run program does meanwhile: the checkout appears where the task said.
        subprocess.run(["git", "clone", "-q", str(harness.workspace), str(later)], check=True)
        (later / "MADE-LATER.txt").write_text("written after the engine started\n")
        harness.server.add(Shell("cat MADE-LATER.txt && pwd"), Text("Read it."))

        watch = Watch(await early.launch(attrs.evolve(early_task, prompt="Read MADE-LATER.txt.")))
        harness.watches.append(watch)
        await watch.turn_ended()

        first, second = harness.server.model_requests()
        assert first.last_user_text() == "Read MADE-LATER.txt."
        results = "\n".join(second.tool_results())
        assert "written after the engine started" in results, results
        assert str(later.resolve()) in results, results
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    async def test_an_early_start_discarded_leaves_no_process(self, harness: Harness) -> None:
        before = {child.pid for child in psutil.Process().children()}
        early_task = harness.task("", workspace=harness.workspace.parent / "never-made")
        early = await self.starts_early(harness).start_early(early_task)
        tree = engine_processes(before)
        assert tree, "no engine process found"

        await asyncio.wait_for(early.discard(), STOP_TIMEOUT_S)

        _gone, alive = psutil.wait_procs(still_running(tree), timeout=5)
        assert not alive, f"left running after discard: {alive}"
        assert harness.server.model_requests() == []

    @pytest.mark.parametrize("when", ["at once", "once its process runs"])
    async def test_a_cancelled_early_start_leaves_no_process(
        self, harness: Harness, when: str
    ) -> None:
        """The run program cancels a start still under way when the clone ends first (a stop,
        a failed target): whenever the cancel comes, no process of the engine's is left once
        the cancelled start returns. A start that ended before the cancel came is discarded
        instead, as the run program does."""
        before = {child.pid for child in psutil.Process().children()}
        early_task = harness.task("", workspace=harness.workspace.parent / "never-made")
        starting = asyncio.ensure_future(self.starts_early(harness).start_early(early_task))
        if when != "at once":
            async with asyncio.timeout(STOP_TIMEOUT_S):
                while not engine_processes(before) and not starting.done():
                    await asyncio.sleep(0.005)
        starting.cancel()
        async with asyncio.timeout(STOP_TIMEOUT_S):
            (started,) = await asyncio.gather(starting, return_exceptions=True)
        if not isinstance(started, BaseException):
            await asyncio.wait_for(started.discard(), STOP_TIMEOUT_S)
        elif not isinstance(started, asyncio.CancelledError):
            raise started

        _gone, alive = psutil.wait_procs(still_running(engine_processes(before)), timeout=5)
        assert not alive, f"left running after the cancelled start: {alive}"
        assert harness.server.model_requests() == []

    async def test_a_task_that_changed_since_the_early_start_is_launched_anew(
        self, harness: Harness
    ) -> None:
        """The early program was started for one environment; the task launched says another:
        the engine works with the task's, and the early program is gone."""
        before = {child.pid for child in psutil.Process().children()}
        early_task = harness.task("", env={**harness.env, "SHADOWCLONE_EARLY_MARK": "early"})
        early = await self.starts_early(harness).start_early(early_task)
        tree = engine_processes(before)
        harness.server.add(Shell("echo mark=$SHADOWCLONE_EARLY_MARK"), Text("Shown."))

        task = attrs.evolve(
            early_task,
            prompt="Show the mark.",
            env={**harness.env, "SHADOWCLONE_EARLY_MARK": "launched"},
        )
        watch = Watch(await early.launch(task))
        harness.watches.append(watch)
        await watch.turn_ended()

        results = "\n".join(harness.server.model_requests()[1].tool_results())
        assert "mark=launched" in results, results
        _gone, alive = psutil.wait_procs(still_running(tree), timeout=5)
        assert not alive, f"the early program outlived the new launch: {alive}"
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE
