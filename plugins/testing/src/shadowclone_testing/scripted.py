"""The scripted engine: follows a small script instead of a model, so a whole clone runs with no
model (the demo and the end-to-end tests).

It is an `Engine` like the real ones, and goes through the same paths: its events are the
normalized ones, an owner's message sent with `send()` becomes part of the work, and a question
goes through the real `shadowclone_ask` MCP server, the run program's own at `EngineTask.ask_url`
(spoken to in MCP's JSON-RPC over httpx2) or else started from `EngineTask.ask_command` over
stdio with the MCP SDK's client, so the question progress line, the answer from
`deliveries.jsonl` and the timeout path are exactly what a real engine meets. (The SDK is
imported only for the stdio server: its import, half a second, would be most of a demo's
engine start.)

Where the script comes from: the variable `SHADOWCLONE_SCRIPT`, looked up in `task.env` and then
in this process's environment. Its value is either a JSON list of steps, or the path of a file
holding one. Without it, `default_script(task.prompt)` is played. A script that cannot be read
makes `launch()` raise `BadInput`.

The steps, as JSON objects (the Python classes in `scripted_steps` have the same fields):

    {"say": "text"}                          a TextEvent
    {"write": "path", "content": "text"}     a file in the workspace: ToolUseEvent "write"
    {"run": "command"}                       a shell command in the workspace: ToolUseEvent
                                             "shell", then its output in a TextEvent
    {"ask": "question", "options": ["a", "b"], "recommended": "b"}
                                             the ask tool; the choice becomes `{answer}`
    {"wait_for_message": 30}                 wait up to 30 s for a message from `send()`, unless
                                             one came since the last such wait (or the start)
    {"sleep": 0.5}                           wait half a second
    {"fail": "message"}                      crash: FinishedEvent FAILED with the message

In the texts of later steps `{answer}` is replaced by the last answer to an `ask`, and
`{message}` by the last message from the owner. A message the owner sends is handled after the
current step (at once during `wait_for_message`): it is appended to `NOTES.md` in the workspace
and acknowledged in a TextEvent. After the last step the turn ends (UsageEvent, TurnEndedEvent);
a message then starts a next turn that handles it, `close()` ends the session DONE, and `stop()`
ends it STOPPED at any time, with any command it runs. The engine never commits: the run program
saves the work after it.

A `wait_for_message` or `sleep` longer than the run program's stall timeout looks like a stall.
The ask server's stderr is kept in `ask-server.log` in the task's state folder; a failed ask
ends the session FAILED with its last lines.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from shadowclone.plugin import (
    BadInput,
    EngineEvent,
    EngineTask,
    FinishedEvent,
    Outcome,
    Refused,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
    contract,
)

from shadowclone_testing.scripted_ask import (
    ASK_START_TIMEOUT_S,
    ASK_TIMEOUT_MARGIN_S,
    LOG_TAIL_CHARS,
    MCP_PROTOCOL_VERSION,
    ToolResult,
    call_ask_server,
)
from shadowclone_testing.scripted_inbox import Inbox
from shadowclone_testing.scripted_steps import (
    REVIEW_MARK,
    SCRIPT_VARIABLE,
    STEP_KINDS,
    Ask,
    Fail,
    Run,
    Say,
    ScriptFailed,
    Sleep,
    Step,
    WaitForMessage,
    Write,
    default_script,
    first_line,
    parse_script,
    script_from,
    script_json,
)
from shadowclone_testing.scripted_tools import OUTPUT_CHARS, put_file, run_command

SERVER_NAME, TOOL_NAME = contract.ASK_SERVER, contract.ASK_TOOL

__all__ = [
    "ASK_START_TIMEOUT_S",
    "ASK_TIMEOUT_MARGIN_S",
    "ASK_TOOL",
    "LOG_TAIL_CHARS",
    "MCP_PROTOCOL_VERSION",
    "NOTES_FILE",
    "OUTPUT_CHARS",
    "REVIEW_MARK",
    "SCRIPT_VARIABLE",
    "STEP_KINDS",
    "STOP_TIMEOUT_S",
    "Ask",
    "Fail",
    "Run",
    "Say",
    "ScriptFailed",
    "ScriptedEngine",
    "ScriptedSession",
    "Sleep",
    "Step",
    "ToolResult",
    "WaitForMessage",
    "Write",
    "default_script",
    "first_line",
    "parse_script",
    "script_from",
    "script_json",
    "transcript_name",
]

log = logging.getLogger(__name__)

NOTES_FILE = "NOTES.md"
"""Where the owner's messages are written down in the workspace, as part of the work."""

ASK_TOOL = f"mcp__{SERVER_NAME}__{TOOL_NAME}"
"""The name a real engine reports for the ask tool."""

STOP_TIMEOUT_S = 10.0
"""`stop()` waits this long for the script to unwind (the ask server needs about 2 s)."""

_OWNER_ANSWERED = re.compile(r"The owner answered your question \([^)]*\): (?P<choice>.*)", re.S)
_TIMEOUT_TOOK = "your recommended option was taken"


# --------------------------------------------------------------------------- the engine


class ScriptedEngine:
    """Starts scripted sessions (the `Engine` protocol). `script`, when given, is played for
    every task instead of the one the task's environment names."""

    def __init__(self, script: Sequence[Step] | None = None) -> None:
        self.script = tuple(script) if script is not None else None

    async def launch(self, task: EngineTask) -> ScriptedSession:
        steps = self.script
        if steps is None:
            steps = script_from(task.env)
        if steps is None:
            steps = script_from(os.environ)
        if steps is None:
            steps = default_script(task.prompt)
        if not task.workspace.is_dir():
            raise BadInput(f"the workspace {task.workspace} is not a folder")
        session = ScriptedSession(task, steps)
        log.info("scripted engine: %d steps in %s", len(steps), task.workspace)
        return session

    # ---- the KeepsSessions protocol: a session is the list of the tasks it was given

    def session_files(self, task: EngineTask, session_id: str) -> list[str]:
        name = transcript_name(session_id)
        return [name] if (task.state_dir / name).is_file() else []

    def session_place(self, task: EngineTask, session_id: str, name: str) -> str:
        return name


def transcript_name(session_id: str) -> str:
    """Where in its state folder a scripted session notes each task it was given."""
    return f"scripted/{session_id}.txt"


class ScriptedSession:
    """One played script (the `EngineSession` protocol)."""

    def __init__(self, task: EngineTask, steps: Sequence[Step]) -> None:
        self.task = task
        self.steps = tuple(steps)
        self.answer = ""
        self.message = ""
        self._events: asyncio.Queue[EngineEvent] = asyncio.Queue()
        self._mail = Inbox()
        self._stopping = False
        self._finished = False
        self._step = 0
        self._session_id = task.resume or f"scripted-{uuid.uuid4().hex[:12]}"
        self._earlier = self._note_task()
        self._runner = asyncio.create_task(self._run(), name="scripted engine")

    # ---- the EngineSession protocol

    @property
    def session_id(self) -> str | None:
        return self._session_id

    async def events(self) -> AsyncIterator[EngineEvent]:
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, FinishedEvent):
                return

    async def send(self, message: str) -> None:
        if self._runner.done() or self._mail.closing or self._stopping:
            raise Refused("the scripted engine takes no more messages: it is ending")
        self._mail.put(message)

    async def close(self) -> None:
        self._mail.close()

    async def stop(self) -> None:
        if self._runner.done():
            return
        if not self._stopping:
            # Once only: a second cancel would cut short the ask server's shielded shutdown.
            self._stopping = True
            self._runner.cancel()
        done, _ = await asyncio.wait({self._runner}, timeout=STOP_TIMEOUT_S)
        if not done:
            log.warning("the scripted engine did not unwind within %s s", STOP_TIMEOUT_S)
            self._finish(Outcome.STOPPED, "stopped; the script did not unwind in time")

    def _note_task(self) -> str | None:
        """Note the task in the session's transcript; return the first task of a resumed
        session's transcript ("" for a new session, None when there is none to resume)."""
        transcript = self.task.state_dir / transcript_name(self._session_id)
        earlier = ""
        if self.task.resume:
            if not transcript.is_file():
                return None
            earlier = transcript.read_text().split("\n", 1)[0]
        transcript.parent.mkdir(parents=True, exist_ok=True)
        with transcript.open("a") as notes:
            notes.write(first_line(self.task.prompt) + "\n")
        return earlier

    # ---- playing

    def _emit(self, event: EngineEvent) -> None:
        self._events.put_nowait(event)

    def _finish(self, outcome: Outcome, detail: str = "") -> None:
        if not self._finished:
            self._finished = True
            log.info("scripted engine ended: %s %s", outcome.value, detail[:200])
            self._emit(FinishedEvent(outcome, detail))

    async def _run(self) -> None:
        try:
            await self._play()
        except asyncio.CancelledError:
            self._finish(Outcome.STOPPED, f"stopped at step {self._step} of {len(self.steps)}")
            if not self._stopping:
                raise
        except ScriptFailed as failure:
            self._finish(Outcome.FAILED, str(failure))
        except Exception as error:
            log.exception("the scripted engine broke at step %d", self._step)
            self._finish(
                Outcome.FAILED, f"the scripted engine broke at step {self._step}: {error!r}"
            )
        else:
            self._finish(Outcome.DONE)

    async def _play(self) -> None:
        if self._earlier is None:
            # As an engine's CLI does: the process starts, and ends failed.
            raise ScriptFailed(f"no scripted session {self.task.resume} to resume")
        if self._earlier:
            self._emit(TextEvent(f"I remember my earlier session, which began: {self._earlier}"))
        for number, step in enumerate(self.steps, 1):
            self._step = number
            await self._do(step)
            self._take_messages()
        self._end_turn()
        # Between turns, like a real engine: a message starts the next turn, close ends it.
        while await self._mail.wait(None):
            if not self._mail.waiting:
                return
            self._take_messages()
            self._end_turn()

    def _end_turn(self) -> None:
        self._emit(UsageEvent(input_tokens=0, output_tokens=0, cost_usd=0.0))
        self._emit(TurnEndedEvent())

    async def _do(self, step: Step) -> None:
        log.debug("step %d: %r", self._step, step)
        match step:
            case Say(text=text):
                self._emit(TextEvent(self._filled(text)))
            case Write(path=path, content=content):
                self._write(self._filled(path), self._filled(content))
            case Run(command=command):
                await self._run_command(self._filled(command))
            case Ask():
                await self._ask(step)
            case WaitForMessage(timeout_s=timeout_s):
                await self._wait_for_message(timeout_s)
            case Sleep(seconds=seconds):
                await asyncio.sleep(seconds)
            case Fail(message=message):
                raise ScriptFailed(self._filled(message))

    def _filled(self, text: str) -> str:
        return text.replace("{answer}", self.answer).replace("{message}", self.message)

    # ---- messages

    async def _wait_for_message(self, timeout_s: float) -> None:
        """Handle a message: one that came since the last such wait, or the next one to come.
        A message sent a little early is not missed, so the owner and the script need not meet
        to the second."""
        mail = self._mail
        if mail.heard == mail.heard_before_wait and await mail.wait(timeout_s):
            self._take_messages()
        if mail.heard == mail.heard_before_wait:
            self._emit(TextEvent(f"No message came in {timeout_s:g} s; going on."))
        mail.heard_before_wait = mail.heard

    def _take_messages(self) -> None:
        """Make each waiting message part of the work: note it down and say so."""
        while (message := self._mail.take()) is not None:
            self.message = message
            notes = self.task.workspace / NOTES_FILE
            heading = "" if notes.exists() else "# Notes from the owner\n\n"
            self._put(notes, f"{heading}- {' '.join(message.split())}\n", append=True)
            self._emit(ToolUseEvent("write", NOTES_FILE))
            self._emit(TextEvent(f"Got your message; I noted it in {NOTES_FILE}: {message}"))

    # ---- tools

    def _write(self, path: str, content: str) -> None:
        workspace = self.task.workspace.resolve()
        target = (workspace / path).resolve()
        if not target.is_relative_to(workspace) or target == workspace:
            raise ScriptFailed(f"step {self._step}: {path!r} is not a file in the workspace")
        self._emit(ToolUseEvent("write", path))
        self._put(target, content)

    def _put(self, target: Path, content: str, append: bool = False) -> None:
        put_file(self.task, self._step, target, content, append)

    async def _run_command(self, command: str) -> None:
        self._emit(ToolUseEvent("shell", " ".join(command.split())))
        self._emit(TextEvent(await run_command(self.task, command)))

    async def _ask(self, step: Ask) -> None:
        question = self._filled(step.question)
        arguments = {
            "question": question,
            "options": list(step.options),
            "recommended": step.recommended,
        }
        self._emit(ToolUseEvent(ASK_TOOL, " ".join(question.split())))
        result, log_tail = await call_ask_server(self.task, self._step, arguments)
        said = result.text
        if result.is_error:
            raise ScriptFailed(f"step {self._step}: the ask tool refused the question: {said}")
        if match := _OWNER_ANSWERED.match(said):
            self.answer = match["choice"].strip()
            self._emit(TextEvent(f"The owner chose: {self.answer}"))
        elif _TIMEOUT_TOOK in said:
            self.answer = step.recommended
            self._emit(TextEvent(f"No answer in time; I go with my recommendation: {self.answer}"))
        else:
            detail = f"; the ask server's log ends:\n{log_tail}" if log_tail else ""
            raise ScriptFailed(
                f"step {self._step}: cannot read the ask tool's result: {said!r}{detail}"
            )
