"""The scenarios of a session that ends early: a stop, or the engine dying."""

from __future__ import annotations

import asyncio
import signal

import psutil
from shadowclone.plugin.types import Outcome, ToolUseEvent

from shadowclone_testing.fakes.models import Shell
from shadowclone_testing.suites.engines.base import ScenarioBase
from shadowclone_testing.suites.engines.harness import Harness
from shadowclone_testing.suites.engines.processes import (
    engine_processes,
    odd_sleep,
    processes_running,
    still_running,
    wait_for_process,
)
from shadowclone_testing.suites.engines.watch import STOP_TIMEOUT_S


class StopScenarios(ScenarioBase):
    """Whichever way the session ends early, no process of the engine's is left."""

    # ---- stop and crash

    async def test_stop_during_a_turn_ends_the_process_tree(self, harness: Harness) -> None:
        sleep = odd_sleep(987)
        harness.server.add(Shell(f"echo started && {sleep} && echo over"))
        before = {child.pid for child in psutil.Process().children()}

        watch = await harness.launch("Run the endless job.")
        await watch.next(ToolUseEvent)
        await wait_for_process(sleep)
        tree = engine_processes(before)
        assert tree, "no engine process found"

        await asyncio.wait_for(watch.session.stop(), STOP_TIMEOUT_S)
        finished = await watch.finished(timeout=STOP_TIMEOUT_S)

        assert finished.outcome is Outcome.STOPPED
        _gone, alive = psutil.wait_procs(still_running(tree), timeout=5)
        assert not alive, f"left running after stop: {alive}"
        assert not processes_running(sleep), "the tool's process outlived the engine"

    async def test_the_engine_dying_mid_turn_fails_with_its_last_output(
        self, harness: Harness
    ) -> None:
        sleep = odd_sleep(986)
        harness.server.add(Shell(f"echo started && {sleep} && echo over"))
        before = {child.pid for child in psutil.Process().children()}

        watch = await harness.launch("Run the endless job.")
        await watch.next(ToolUseEvent)
        await wait_for_process(sleep)
        roots = [child for child in psutil.Process().children() if child.pid not in before]
        assert len(roots) == 1, roots
        roots[0].send_signal(signal.SIGKILL)
        finished = await watch.finished()

        assert finished.outcome is Outcome.FAILED
        assert sleep.removeprefix("sleep ") in finished.detail, finished.detail
        async with asyncio.timeout(STOP_TIMEOUT_S):
            while processes_running(sleep):
                await asyncio.sleep(0.1)
