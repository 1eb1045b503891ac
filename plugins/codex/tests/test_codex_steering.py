"""The driver's side of the races around `turn/steer`, played on cue by a scripted stand-in for
the app-server (scripted_app_server.py, a real subprocess speaking the same JSON-RPC lines): a
message that misses the turn it was meant for starts the next turn, whichever way the race went,
and is never lost or sent twice. Also: the answers to Codex's own requests, and a session that
cannot open."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from shadowclone.plugin import EngineTask, Outcome, Refused, TurnEndedEvent, UsageEvent
from shadowclone_testing.suites.engine import Watch, processes_running

from shadowclone_codex.driver import CodexEngine

pytestmark = pytest.mark.anyio

SCRIPTED = Path(__file__).with_name("scripted_app_server.py")
MESSAGE = "Owner says: also update the docs."


class Stand:
    """The stand-in app-server of one test: how to launch it, and what it received."""

    def __init__(self, tmp_path: Path, scenario: str) -> None:
        self.log = tmp_path / "received.jsonl"
        self.program = tmp_path / "codex"
        # The test's folder on the command line tells this stand's processes from others'.
        self.marker = str(tmp_path)
        self.program.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{SCRIPTED}" "$@" "{self.marker}"\n'
        )
        self.program.chmod(self.program.stat().st_mode | stat.S_IXUSR)
        self.task = EngineTask(
            workspace=tmp_path,
            prompt="First task.",
            ask_command=(sys.executable, "-c", "pass"),
            env={
                "SCRIPTED_SCENARIO": scenario,
                "SCRIPTED_LOG": str(self.log),
                "OPENAI_API_KEY": "sk-unused",
            },
            state_dir=tmp_path / "state",
        )

    def received(self, method: str | None = None) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [line for line in lines if method is None or line.get("method") == method]

    def turn_inputs(self) -> list[list[str]]:
        return [
            [part["text"] for part in line["params"]["input"]]
            for line in self.received("turn/start")
        ]


@pytest.fixture
async def watches() -> AsyncIterator[list[Watch]]:
    opened: list[Watch] = []
    yield opened
    for watch in opened:
        await watch.aclose()


async def launch(stand: Stand, watches: list[Watch]) -> Watch:
    watch = Watch(await CodexEngine(str(stand.program)).launch(stand.task))
    watches.append(watch)
    return watch


@pytest.mark.parametrize("scenario", ["error-then-end", "end-then-error", "steer-unseen"])
async def test_a_message_that_misses_its_turn_starts_the_next(
    tmp_path: Path, watches: list[Watch], scenario: str
) -> None:
    stand = Stand(tmp_path, scenario)
    watch = await launch(stand, watches)

    await watch.session.send(MESSAGE)
    await watch.turn_ended()
    await watch.turn_ended()
    await watch.session.close()
    finished = await watch.finished()

    (steer,) = stand.received("turn/steer")
    assert steer["params"]["expectedTurnId"] == "turn-1"
    assert stand.turn_inputs() == [["First task."], [MESSAGE]]
    assert finished.outcome is Outcome.DONE, finished.detail


async def test_messages_between_turns_start_a_turn_without_a_steer(
    tmp_path: Path, watches: list[Watch]
) -> None:
    stand = Stand(tmp_path, "end-then-error")
    watch = await launch(stand, watches)
    await watch.session.send(MESSAGE)
    await watch.turn_ended()
    await watch.turn_ended()

    await watch.session.send("And one more thing.")
    await watch.turn_ended()

    assert len(stand.received("turn/steer")) == 1
    assert stand.turn_inputs()[-1] == ["And one more thing."]


async def test_a_sub_agent_s_thread_neither_ends_nor_takes_the_turn(
    tmp_path: Path, watches: list[Watch]
) -> None:
    stand = Stand(tmp_path, "sub-agent")
    watch = await launch(stand, watches)

    # Had the driver taken the sub-agent's turn for its own, this would start a turn instead
    # of steering the first one, and a turn would have ended.
    await watch.session.send(MESSAGE)
    await watch.turn_ended()
    await watch.turn_ended()

    (steer,) = stand.received("turn/steer")
    assert steer["params"]["expectedTurnId"] == "turn-1"
    assert stand.turn_inputs() == [["First task."], [MESSAGE]]
    assert len(watch.seen(TurnEndedEvent)) == 2
    assert all(usage.input_tokens == 0 for usage in watch.seen(UsageEvent))


async def test_codex_s_requests_are_answered_and_unknown_ones_refused(
    tmp_path: Path, watches: list[Watch]
) -> None:
    stand = Stand(tmp_path, "ask-the-driver")
    watch = await launch(stand, watches)

    await watch.turn_ended()

    answers = {line["id"]: line for line in stand.received() if "method" not in line}
    assert answers[0]["result"] == {"decision": "accept"}
    assert answers[1]["error"]["code"] == -32601
    assert "item/tool/call" in answers[1]["error"]["message"]


async def test_a_session_that_cannot_open_fails_with_the_reason(
    tmp_path: Path, watches: list[Watch]
) -> None:
    stand = Stand(tmp_path, "thread-refused")
    watch = await launch(stand, watches)

    finished = await watch.finished()

    assert finished.outcome is Outcome.FAILED
    assert "required MCP servers failed to start" in finished.detail
    assert not watch.seen(TurnEndedEvent)
    with pytest.raises(Refused):
        await watch.session.send(MESSAGE)


async def test_a_server_that_lingers_after_close_is_ended_and_the_session_is_done(
    tmp_path: Path, watches: list[Watch]
) -> None:
    stand = Stand(tmp_path, "linger")
    watch = await launch(stand, watches)
    await watch.turn_ended()

    await watch.session.close()
    finished = await watch.finished(timeout=60)

    assert finished.outcome is Outcome.DONE, finished.detail
    assert not processes_running(stand.marker)


async def test_the_handshake_names_the_client_and_opens_the_thread_in_the_workspace(
    tmp_path: Path, watches: list[Watch]
) -> None:
    stand = Stand(tmp_path, "ask-the-driver")
    watch = await launch(stand, watches)
    await watch.turn_ended()
    await watch.session.close()
    assert (await watch.finished()).outcome is Outcome.DONE

    methods = [line.get("method") for line in stand.received()]
    assert methods[:4] == ["initialize", "initialized", "thread/start", "turn/start"]
    (initialize,) = stand.received("initialize")
    assert initialize["params"]["clientInfo"]["name"] == "shadowclone"
    (thread,) = stand.received("thread/start")
    assert thread["params"]["cwd"] == str(stand.task.workspace)
    (first,) = stand.received("turn/start")
    assert first["params"]["threadId"] == "thread-1"
    assert first["params"]["clientUserMessageId"]
