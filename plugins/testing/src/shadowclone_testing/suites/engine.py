"""One scenario suite for every engine, run against the real CLI and the fake model server.

An engine's test module subclasses `EngineScenarios`, names the programs it needs and says how
to build its `Engine` and the provider environment that points it at the fake server:

    class TestClaude(EngineScenarios):
        engine_binaries = ("claude",)

        def make_engine(self) -> Engine: ...
        def provider_env(self, server: FakeModelServer) -> dict[str, str]: ...

An engine that can start before its workspace exists (`StartsEarly`) subclasses
`EarlyStartScenarios` instead, which adds the early start's scenarios.

The scenarios: a turn that runs a shell command and ends; a message sent mid-turn
reaches the model in the same session and the clone goes on; the ask tool of the real
`shadowclone_ask` server puts a question in the run folder's progress lines and returns the
owner's delivered answer to the model, or the recommended option once its wait limit passes;
stop during a turn ends the whole process tree within seconds; the engine process dying mid-turn
gives a failed outcome with its last output. Each scenario scripts the fake server, launches a
session on a fresh git workspace and follows the session's events with `Watch`.

A subclass also says, through its driver's own helpers, how long the engine lets one call of
the ask tool run (`ask_tool_timeout_s`), so that a 30-minute question is never cut short.

The suite lives in `suites.engines`, one concern a module; this module is where tests import
it from.
"""

from __future__ import annotations

from shadowclone_testing.suites.engines.ask import (
    ASK_TOOL,
    ASK_TOOL_TIMEOUT_MARGIN_S,
    LONG_ASK_TIMEOUT_S,
    SHORT_ASK_TIMEOUT_S,
)
from shadowclone_testing.suites.engines.early import EarlyStartScenarios
from shadowclone_testing.suites.engines.harness import (
    SEND_TO_MODEL,
    STAND_IN_ASK_SERVER,
    Harness,
    git_workspace,
    send_and_time,
)
from shadowclone_testing.suites.engines.processes import (
    engine_processes,
    odd_sleep,
    processes_running,
    still_running,
    wait_for_process,
)
from shadowclone_testing.suites.engines.progress import (
    deliver_answer,
    progress_lines,
    wait_for_progress,
    wait_for_progress_lines,
)
from shadowclone_testing.suites.engines.scenarios import EngineScenarios
from shadowclone_testing.suites.engines.sessions import SessionScenarios
from shadowclone_testing.suites.engines.watch import STOP_TIMEOUT_S, TURN_TIMEOUT_S, Watch

__all__ = [
    "ASK_TOOL",
    "ASK_TOOL_TIMEOUT_MARGIN_S",
    "LONG_ASK_TIMEOUT_S",
    "SEND_TO_MODEL",
    "SHORT_ASK_TIMEOUT_S",
    "STAND_IN_ASK_SERVER",
    "STOP_TIMEOUT_S",
    "TURN_TIMEOUT_S",
    "EarlyStartScenarios",
    "EngineScenarios",
    "Harness",
    "SessionScenarios",
    "Watch",
    "deliver_answer",
    "engine_processes",
    "git_workspace",
    "odd_sleep",
    "processes_running",
    "progress_lines",
    "send_and_time",
    "still_running",
    "wait_for_process",
    "wait_for_progress",
    "wait_for_progress_lines",
]
