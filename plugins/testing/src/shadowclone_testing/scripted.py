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

The steps, as JSON objects (the Python classes below have the same fields):

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
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import httpx2
from shadowclone.errors import BadInput, Refused
from shadowclone.plugin import contract
from shadowclone.plugin.types import (
    EngineEvent,
    EngineTask,
    FinishedEvent,
    Outcome,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)

SERVER_NAME, TOOL_NAME = contract.ASK_SERVER, contract.ASK_TOOL

log = logging.getLogger(__name__)

SCRIPT_VARIABLE = "SHADOWCLONE_SCRIPT"
"""A JSON list of steps, or the path of a JSON file holding one."""

NOTES_FILE = "NOTES.md"
"""Where the owner's messages are written down in the workspace, as part of the work."""

ASK_TOOL = f"mcp__{SERVER_NAME}__{TOOL_NAME}"
"""The name a real engine reports for the ask tool."""

ASK_START_TIMEOUT_S = 30.0
MCP_PROTOCOL_VERSION = "2025-06-18"
"""How long the ask server may take to start and answer the handshake."""
ASK_TIMEOUT_MARGIN_S = 60.0
"""Added to the ask wait limit: the server itself takes the recommended option in time."""
STOP_TIMEOUT_S = 10.0
"""`stop()` waits this long for the script to unwind (the ask server needs about 2 s)."""
OUTPUT_CHARS = 4000
"""How much of a command's output (its end) goes into the TextEvent."""
LOG_TAIL_CHARS = 2000

_OWNER_ANSWERED = re.compile(r"The owner answered your question \([^)]*\): (?P<choice>.*)", re.S)
_TIMEOUT_TOOK = "your recommended option was taken"


# --------------------------------------------------------------------------- the steps


def _text(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"`{attribute.name}` must be a string, not {value!r}")


def _seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"`{attribute.name}` must be a number of seconds, not {value!r}")


def _options(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(option, str) for option in value):
        raise ValueError(f"`{attribute.name}` must be a list of strings, not {value!r}")


def _as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen
class Say:
    """Say something to the owner: a TextEvent."""

    text: str = attrs.field(validator=_text)


@attrs.frozen
class Write:
    """Write a file in the workspace (its path relative to it): a ToolUseEvent `write`."""

    path: str = attrs.field(validator=_text)
    content: str = attrs.field(validator=_text)


@attrs.frozen
class Run:
    """Run a shell command in the workspace: a ToolUseEvent `shell`, then its output."""

    command: str = attrs.field(validator=_text)


@attrs.frozen
class Ask:
    """Ask the owner through the ask server; the choice is `{answer}` from then on."""

    question: str = attrs.field(validator=_text)
    options: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=_options)
    recommended: str = attrs.field(validator=_text)


@attrs.frozen
class WaitForMessage:
    """Wait up to `timeout_s` for a message from the owner, and handle it."""

    timeout_s: float = attrs.field(default=60.0, validator=_seconds)


@attrs.frozen
class Sleep:
    seconds: float = attrs.field(validator=_seconds)


@attrs.frozen
class Fail:
    """Crash: the session ends FAILED with `message` as its detail."""

    message: str = attrs.field(validator=_text)


Step = Say | Write | Run | Ask | WaitForMessage | Sleep | Fail

STEP_KINDS: Mapping[str, type[Step]] = {
    "say": Say,
    "write": Write,
    "run": Run,
    "ask": Ask,
    "wait_for_message": WaitForMessage,
    "sleep": Sleep,
    "fail": Fail,
}
"""The key that names each step in JSON; its value is the step's first field."""

_KIND_OF: Mapping[type[Step], str] = {kind: name for name, kind in STEP_KINDS.items()}


def parse_script(data: object) -> tuple[Step, ...]:
    """The steps of a script in its JSON form, or `ValueError` naming the step at fault."""
    if not isinstance(data, list):
        raise ValueError(f"a script is a list of steps, not {type(data).__name__}")
    return tuple(_parse_step(number, item) for number, item in enumerate(data, 1))


def _parse_step(number: int, item: object) -> Step:
    if not isinstance(item, dict):
        raise ValueError(f"step {number} is not an object: {item!r}")
    named = [key for key in item if key in STEP_KINDS]
    if len(named) != 1:
        raise ValueError(
            f"step {number} must name exactly one of {', '.join(STEP_KINDS)}: {item!r}"
        )
    [name] = named
    kind = STEP_KINDS[name]
    first, *rest = attrs.fields(kind)
    unknown = set(item) - {name} - {field.name for field in rest}
    if unknown:
        raise ValueError(f"step {number} ({name}) has unknown keys: {', '.join(sorted(unknown))}")
    arguments = {first.name: item[name], **{key: item[key] for key in item if key != name}}
    try:
        return kind(**arguments)
    except (TypeError, ValueError) as error:
        raise ValueError(f"step {number} ({name}): {error}") from None


def script_json(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The JSON form of `steps`, as `SHADOWCLONE_SCRIPT` takes it (`json.dumps` it)."""
    documents = []
    for step in steps:
        first, *rest = attrs.fields(type(step))
        document: dict[str, Any] = {_KIND_OF[type(step)]: getattr(step, first.name)}
        for field in rest:
            value = getattr(step, field.name)
            document[field.name] = list(value) if isinstance(value, tuple) else value
        documents.append(document)
    return documents


def script_from(env: Mapping[str, str]) -> tuple[Step, ...] | None:
    """The script `SHADOWCLONE_SCRIPT` in `env` gives, None without one; `BadInput` if it
    cannot be read."""
    value = env.get(SCRIPT_VARIABLE, "").strip()
    if not value:
        return None
    where = SCRIPT_VARIABLE
    try:
        if value.startswith("["):
            data = json.loads(value)
        else:
            where = f"{SCRIPT_VARIABLE}={value}"
            data = json.loads(Path(value).read_text(encoding="utf-8"))
        return parse_script(data)
    except (OSError, ValueError) as error:
        raise BadInput(f"{where}: not a script for the scripted engine: {error}") from None


REVIEW_MARK = "(shadowclone self-review)"
"""In the prompt of the self-review stage's session: there the default script only approves."""


def default_script(prompt: str) -> tuple[Step, ...]:
    """The script played when none is given: read the issue, write a greeting, ask the owner
    which style it should have, rewrite it so, and say it is done. Asked to review a change,
    it approves it."""
    if REVIEW_MARK in prompt:
        return (Say("PASS: the change does what the issue asks."),)
    issue = first_line(prompt) or "the task"
    return (
        Say(f"I read the issue: {issue}"),
        Write("GREETING.md", f"# Greeting\n\nHello! This greeting answers: {issue}\n"),
        Ask(
            "Which greeting style should GREETING.md use?",
            ("formal", "friendly"),
            "friendly",
        ),
        Write(
            "GREETING.md",
            f"# Greeting\n\nHello, in a {{answer}} style! This greeting answers: {issue}\n",
        ),
        Say("Done: GREETING.md now holds a {answer} greeting."),
    )


def first_line(text: str, limit: int = 200) -> str:
    """The first line of `text` with words in it, without a Markdown heading's marks."""
    for line in text.splitlines():
        words = line.strip().lstrip("#").strip()
        if words:
            return words[:limit]
    return ""


# --------------------------------------------------------------------------- the engine


class ScriptFailed(Exception):
    """The script ends the session FAILED; `str()` is the FinishedEvent's detail."""


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
        self._inbox: list[str] = []
        self._heard = 0
        """Messages handled so far."""
        self._heard_before_wait = 0
        self._input = asyncio.Event()
        self._closing = False
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
        if self._runner.done() or self._closing or self._stopping:
            raise Refused("the scripted engine takes no more messages: it is ending")
        self._inbox.append(message)
        self._input.set()

    async def close(self) -> None:
        self._closing = True
        self._input.set()

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
        while await self._wait_for_input(None):
            if not self._inbox:
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
        if self._heard == self._heard_before_wait and await self._wait_for_input(timeout_s):
            self._take_messages()
        if self._heard == self._heard_before_wait:
            self._emit(TextEvent(f"No message came in {timeout_s:g} s; going on."))
        self._heard_before_wait = self._heard

    async def _wait_for_input(self, timeout_s: float | None) -> bool:
        """Wait until a message waits or the session is closing; False if `timeout_s` passed."""
        try:
            async with asyncio.timeout(timeout_s):
                while not self._inbox and not self._closing:
                    self._input.clear()
                    await self._input.wait()
        except TimeoutError:
            return False
        return True

    def _take_messages(self) -> None:
        """Make each waiting message part of the work: note it down and say so."""
        while self._inbox:
            message = self._inbox.pop(0)
            self._heard += 1
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
        """Write a file as the engine's user, as a real engine's own tool would."""
        if not self.task.run_as:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a" if append else "w", encoding="utf-8") as handle:
                handle.write(content)
            return
        done = subprocess.run(
            [
                *self.task.run_as,
                "/bin/sh",
                "-c",
                f'mkdir -p "$(dirname "$1")" && cat {">>" if append else ">"} "$1"',
                "write",
                str(target),
            ],
            input=content.encode(),
            capture_output=True,
            check=False,
            umask=0o007,
        )
        if done.returncode != 0:
            raise ScriptFailed(
                f"step {self._step}: cannot write {target.name}: "
                + done.stderr.decode(errors="replace").strip()
            )

    async def _run_command(self, command: str) -> None:
        self._emit(ToolUseEvent("shell", " ".join(command.split())))
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *self.task.run_as,
                "/bin/sh",
                "-c",
                command,
                cwd=self.task.workspace,
                env={**os.environ, **self.task.env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                # Its own process group, so a stop ends whatever the command started.
                start_new_session=True,
                umask=0o007 if self.task.run_as else -1,
            )
        )
        try:
            # Shielded: asyncio's own cleanup of a spawn cancelled midway kills only the shell
            # and then waits for the pipes its children still hold open.
            process = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            await _end_group(await spawn)
            raise
        try:
            output, _ = await process.communicate()
        except asyncio.CancelledError:
            await _end_group(process)
            raise
        text = output.decode(errors="replace")[-OUTPUT_CHARS:].rstrip()
        said = f"`{command}` exited with code {process.returncode}"
        self._emit(TextEvent(f"{said}:\n{text}" if text else f"{said}."))

    async def _ask(self, step: Ask) -> None:
        question = self._filled(step.question)
        arguments = {
            "question": question,
            "options": list(step.options),
            "recommended": step.recommended,
        }
        self._emit(ToolUseEvent(ASK_TOOL, " ".join(question.split())))
        result, log_tail = await self._call_ask_server(arguments)
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

    async def _call_ask_server(self, arguments: dict[str, Any]) -> tuple[ToolResult, str]:
        """Call the ask server where the task says it runs (`ask_url`), or start it from
        `task.ask_command`, as a real engine would, and call it."""
        if self.task.ask_url:
            try:
                return await self._call_http(arguments), ""
            except Exception as error:
                raise ScriptFailed(
                    f"step {self._step}: the ask server failed: {_leaves(error)}"
                ) from error
        if not self.task.ask_command:
            raise ScriptFailed(
                f"step {self._step}: no ask server (the task's ask_command is empty)"
            )
        self.task.state_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.task.state_dir / "ask-server.log"
        with log_path.open("a", encoding="utf-8") as errlog:
            try:
                result = await self._call_stdio(errlog, arguments)
            except Exception as error:
                errlog.flush()
                tail = _tail(log_path)
                detail = f"; its log ends:\n{tail}" if tail else ""
                raise ScriptFailed(
                    f"step {self._step}: the ask server failed: {_leaves(error)}{detail}"
                ) from error
        return result, _tail(log_path)

    async def _call_http(self, arguments: dict[str, Any]) -> ToolResult:
        """MCP's streamable HTTP transport as its clients speak it: initialize, say so, call."""
        wait_s = self.task.limits.ask_timeout_s + ASK_TIMEOUT_MARGIN_S
        headers = {**self.task.ask_headers, "Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(ASK_START_TIMEOUT_S, read=wait_s)
        ) as http:
            hello = {
                "protocolVersion": MCP_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "scripted", "version": "1"},
            }
            await _rpc(http, self.task.ask_url, 1, "initialize", hello)
            notified = await http.post(
                self.task.ask_url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            )
            notified.raise_for_status()
            call = {"name": TOOL_NAME, "arguments": arguments}
            result = await _rpc(http, self.task.ask_url, 2, "tools/call", call)
        blocks = result.get("content") if isinstance(result, dict) else None
        if not isinstance(blocks, list):
            raise ValueError(f"a tools/call result with no content: {result!r:.200}")
        text = "\n".join(str(block.get("text", "")) for block in blocks if isinstance(block, dict))
        return ToolResult(text, bool(result.get("isError")))

    async def _call_stdio(self, errlog: TextIO, arguments: dict[str, Any]) -> ToolResult:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.types import TextContent

        command, *args = (*self.task.run_as, *self.task.ask_command)
        params = StdioServerParameters(command=command, args=args, cwd=self.task.workspace)
        wait_s = self.task.limits.ask_timeout_s + ASK_TIMEOUT_MARGIN_S
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=ASK_START_TIMEOUT_S) as client,
        ):
            await client.initialize()
            result = await client.call_tool(TOOL_NAME, arguments, read_timeout_seconds=wait_s)
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        return ToolResult(text, result.is_error)


@attrs.frozen
class ToolResult:
    text: str
    is_error: bool


async def _rpc(
    http: httpx2.AsyncClient, url: str, ident: int, method: str, params: dict[str, Any]
) -> Any:
    """One JSON-RPC request's result; its answer may come as JSON or as an event stream."""
    response = await http.post(
        url, json={"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
    )
    response.raise_for_status()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line[:5] == "data:"]
        answers = [json.loads(item) for item in data if item]
        message = next((a for a in answers if isinstance(a, dict) and a.get("id") == ident), None)
    else:
        message = response.json()
    if not isinstance(message, dict) or "result" not in message:
        raise ValueError(f"{method}: no result in the answer: {message!r:.300}")
    return message["result"]


async def _end_group(process: asyncio.subprocess.Process) -> None:
    """Kill a command's whole process group and reap the command."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


def _leaves(error: BaseException) -> str:
    """The errors inside the SDK's nested exception groups, which say what went wrong."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_leaves(inner) for inner in error.exceptions)
    return repr(error)


def _tail(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-LOG_TAIL_CHARS:].strip()
    except OSError:
        return ""
