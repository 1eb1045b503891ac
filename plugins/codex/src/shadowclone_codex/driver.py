"""The Codex driver: `codex app-server` over JSON-RPC, steered with `turn/steer`.

One app-server process serves a whole clone: the driver opens one thread in the workspace and
runs turns in it (docs/engines.md). A message from the owner while a tool runs (a shell
command, an open question through the ask tool) interrupts the turn and starts the next one with
the message: Codex shows a steered message to the model only once the running tool ends, which
for a long command or a question may take many minutes. Otherwise a message during a turn is
appended to that turn with `turn/steer`, naming the turn it expects; when the turn has just
ended (Codex answers "no active turn to steer") or cannot take input now, the message waits and
starts the next turn as soon as the running one completes. A steered message Codex accepted but
never showed as a user message of its turn is sent again in the next turn. So no message is
dropped.

Approvals and other questions from Codex are answered by policy (`notifications.py`); the
container is the sandbox and the owner is reached only through the ask tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import itertools
import json
import logging
import shlex
import shutil
import signal
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import psutil
from shadowclone.plugin import (
    STOP_GRACE_S,
    EngineTask,
    Outcome,
    ProcessSession,
    ProcessTree,
    Refused,
    spawn_engine,
)

from shadowclone_codex.config import ASK_SERVER, codex_home, engine_env, prepare_home
from shadowclone_codex.instructions import project_instructions
from shadowclone_codex.native import Program, native_program
from shadowclone_codex.notifications import (
    METHOD_NOT_FOUND,
    NotificationNormalizer,
    answer_server_request,
    describe,
    turn_error,
)
from shadowclone_codex.rpc import EngineGone, Rpc, RpcError, wire

log = logging.getLogger(__name__)

PROGRAM = "codex"

HANDSHAKE_TIMEOUT_S = 60.0
THREAD_START_TIMEOUT_S = 180.0
"""`thread/start` waits for the required MCP servers to start (60 s each at most)."""
MCP_READY_TIMEOUT_S = 15.0
"""How long to wait for the ask server's "ready" once the thread exists. Being required, it is
up by then; the wait only guards against a status that arrives late."""
RPC_TIMEOUT_S = 60.0
"""Bound on `turn/start` and `turn/steer`, which Codex answers at once."""
OVERLOADED = -32001
OVERLOADED_RETRIES = 5
INTERRUPT_WAIT_S = 1.0
"""How long `stop()` gives Codex to interrupt the turn itself before signals end it."""
CLOSE_GRACE_S = 10.0
"""How long Codex may take to exit once its input is closed (it takes a moment) before it is
ended with signals."""

OPTED_OUT_NOTIFICATIONS = (
    "item/agentMessage/delta",
    "item/reasoning/textDelta",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/summaryPartAdded",
    "account/rateLimits/updated",
)
"""Notifications the driver never uses: Codex does not send them at all (fewer lines to read
while the model streams)."""


_NOT_TOOLS = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "contextCompaction"})
"""Item types that are the conversation itself; every other item is a tool the model waits on."""


def _client_version() -> str:
    try:
        return importlib.metadata.version("shadowclone-codex")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def text_input(messages: Sequence[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": message} for message in messages]


class StartFailed(Exception):
    """The session could not be opened: thread, ask server or first turn."""


class CodexEngine:
    """Starts Codex sessions (the `Engine` protocol), early too (`StartsEarly`)."""

    def __init__(self, program: str = PROGRAM) -> None:
        self.program = program

    async def launch(self, task: EngineTask) -> CodexSession:
        session = await self._spawn(task, cwd=task.workspace)
        await session.begin(task)
        return session

    def session_files(self, task: EngineTask, session_id: str) -> list[str]:
        """The thread's rollout, which `thread/resume` reads the thread back from."""
        found = sorted(codex_home(task).glob(f"sessions/**/rollout-*-{session_id}.jsonl"))
        return [path.relative_to(task.state_dir).as_posix() for path in found[:1]]

    def session_place(self, task: EngineTask, session_id: str, name: str) -> str:
        """The same place under CODEX_HOME: its date folders and name are the rollout's own."""
        return name

    async def start_early(self, task: EngineTask) -> EarlyCodex:
        """The app-server, its handshake and its thread before the workspace exists, all in
        the state folder: nothing of the workspace is read before `EarlyCodex.launch`."""
        session = await self._spawn(task, cwd=task.state_dir)
        try:
            await session.initialize()
            # The thread too, with the ask server connected: the first turn moves it into the
            # workspace (`turn/start` takes a cwd, which holds for the later turns).
            await session.open_thread(task, task.state_dir)
        except BaseException:
            # Cancelled (the clone stopped while Codex was still starting): nobody will hold
            # this session, so its process goes now.
            await session.abandon()
            raise
        return EarlyCodex(self, task, session)

    async def _spawn(self, task: EngineTask, cwd: Path) -> CodexSession:
        prepare_home(task)
        env = engine_env(task)
        found = shutil.which(self.program, path=env.get("PATH"))
        program = native_program(found) if found else Program(self.program)
        env.update(program.env)
        process, tree = await spawn_engine(
            program.path,
            ["app-server"],
            cwd=cwd,
            env=env,
            install_hint="install @openai/codex (scripts/install-engines does it for the tests)",
            run_as=task.run_as,
        )
        log.info("started codex app-server (pid %d) in %s", process.pid, cwd)
        return CodexSession(process, tree)


class EarlyCodex:
    """A Codex app-server past its handshake, its thread open in the state folder, waiting
    for its workspace (`EarlyStart`)."""

    def __init__(self, engine: CodexEngine, task: EngineTask, session: CodexSession) -> None:
        self._engine = engine
        self._task = task
        self._session = session

    async def launch(self, task: EngineTask) -> CodexSession:
        # Its config.toml was written for the early task: any other setting needs a new one.
        if attrs.evolve(task, prompt=self._task.prompt) != self._task:
            log.info("the task changed since codex started early: starting it again")
            await self.discard()
            return await self._engine.launch(task)
        await self._session.first_turn(task)
        return self._session

    async def discard(self) -> None:
        await self._session.stop()


class CodexSession(ProcessSession):
    """One running `codex app-server` process with one thread (the `EngineSession` protocol)."""

    label = "the codex app-server"

    def __init__(self, process: asyncio.subprocess.Process, tree: ProcessTree) -> None:
        assert process.stdin is not None
        super().__init__(process, tree)
        self._rpc = Rpc(process.stdin)
        self._normalizer = NotificationNormalizer()
        self._lock = asyncio.Lock()
        """Held while deciding between steering and starting a turn, until Codex answered."""
        self._thread_id: str | None = None
        self._turn_id: str | None = None
        """The running turn, from `turn/start` until its `turn/completed`."""
        self._finished_turns: set[str] = set()
        self._tools_running: set[str] = set()
        """Ids of the running turn's tool items that have started and not completed."""
        self._commands: dict[str, str] = {}
        """The running turn's shell commands that have not completed, by item id."""
        self._interrupted: dict[str, list[str]] = {}
        """Turns interrupted for a message -> the commands they were running."""
        self._steered: dict[str, tuple[str, str]] = {}
        """Client message id -> (turn id, message) of steers Codex has not yet shown."""
        self._message_ids = (f"shadowclone-{uuid.uuid4().hex[:8]}-{n}" for n in itertools.count())
        self._mcp_status: dict[str, str] = {}
        self._mcp_changed = asyncio.Event()
        self._closing = False
        self._input_closed = False
        self._ended_after_close = False
        self._start_error = ""
        self._last_error = ""
        """The last error Codex reported that it does not retry."""
        self._turn_failure = ""
        """Why the last turn failed, or "" when it completed."""
        self._flushes: set[asyncio.Task[None]] = set()
        self._closer: asyncio.Task[None] | None = None

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def session_id(self) -> str | None:
        return self._thread_id

    # ---- the EngineSession protocol

    async def send(self, message: str) -> None:
        async with self._lock:
            if self._done.done() or self._closing or self._stopping or self._start_error:
                raise Refused("the Codex session takes no more messages: it is ending")
            if self._turn_id is not None and self._tools_running:
                # Steered input waits for the running tool: a shell command (Codex gives it
                # seconds before it looks again), an open question (up to half an hour).
                # Interrupt, and the message starts the next turn as soon as Codex says the
                # turn is over.
                self._pending.append(message)
                await self._interrupt(self._turn_id)
            elif self._turn_id is not None:
                await self._steer(self._turn_id, message)
            else:
                # Messages still waiting for a turn go first, in the order they came.
                waiting, self._pending = self._pending, []
                try:
                    await self._start_turn_for_sender([*waiting, message])
                except Refused:
                    self._pending[:0] = waiting
                    raise
        await self._until_taken(message)

    async def close(self) -> None:
        async with self._lock:
            self._closing = True
            await self._flush()

    async def stop(self) -> None:
        if self._done.done():
            return
        if self._thread_id is not None and self._turn_id is not None:
            # Codex ends the turn's commands itself; the signals below make sure of it.
            with contextlib.suppress(RpcError, EngineGone, TimeoutError):
                await self._rpc.request(
                    "turn/interrupt",
                    {"threadId": self._thread_id, "turnId": self._turn_id},
                    timeout=INTERRUPT_WAIT_S,
                )
        await self._end()

    # ---- opening the session

    async def begin(self, task: EngineTask) -> None:
        """The handshake, the thread in the workspace, the ask server, the first turn. A failure
        ends the process; the session then finishes FAILED with what went wrong."""
        await self.initialize()
        await self.open_thread(task, task.workspace)
        await self.first_turn(task)

    async def initialize(self) -> None:
        """The handshake, which needs nothing of the task."""
        async with self._starting():
            await self._rpc.request(
                "initialize",
                {
                    "clientInfo": {
                        "name": "shadowclone",
                        "title": "shadowclone",
                        "version": _client_version(),
                    },
                    "capabilities": {"optOutNotificationMethods": list(OPTED_OUT_NOTIFICATIONS)},
                },
                timeout=HANDSHAKE_TIMEOUT_S,
            )
            await self._rpc.notify("initialized")

    async def open_thread(self, task: EngineTask, cwd: Path) -> None:
        """The thread, started in `cwd`, with the ask server ready."""
        if self._start_error:
            return  # a step before failed: the session is ending with it
        async with self._starting():
            # A resumed thread is read back from its rollout under CODEX_HOME (`state_dir`).
            method, params = (
                ("thread/resume", {"threadId": task.resume, "cwd": str(cwd)})
                if task.resume
                else ("thread/start", {"cwd": str(cwd)})
            )
            started = await self._rpc.request(method, params, timeout=THREAD_START_TIMEOUT_S)
            self._thread_id = str(started["thread"]["id"])
            log.info("codex thread %s", self._thread_id)
            if task.ask_url or task.ask_command:
                await self._wait_for_mcp_server(ASK_SERVER)

    async def first_turn(self, task: EngineTask) -> None:
        """The first turn, in the workspace, with the repository's instructions."""
        if self._start_error:
            return
        async with self._starting():
            # A resumed thread has the repository's instructions in its history already.
            instructions = None if task.resume else project_instructions(task.workspace)
            async with self._lock:
                await self._start_turn(
                    [instructions, task.prompt] if instructions else [task.prompt],
                    cwd=task.workspace,
                )

    @contextlib.asynccontextmanager
    async def _starting(self) -> AsyncIterator[None]:
        """A step of opening the session: after a failed step nothing more is tried, and the
        process is ended, so that the session finishes FAILED with what went wrong."""
        try:
            yield
        except (RpcError, EngineGone, StartFailed, TimeoutError, KeyError, TypeError) as error:
            self._start_error = str(error) or type(error).__name__
            log.warning("codex could not open the session: %s", self._start_error)
            self._tree.signal(signal.SIGKILL)

    async def _wait_for_mcp_server(self, name: str) -> None:
        try:
            async with asyncio.timeout(MCP_READY_TIMEOUT_S):
                while True:
                    self._mcp_changed.clear()
                    status = self._mcp_status.get(name)
                    if status == "ready":
                        return
                    if status in ("failed", "cancelled"):
                        raise StartFailed(f"the MCP server {name} {status}")
                    await self._mcp_changed.wait()
        except TimeoutError:
            log.warning("no ready status from the MCP server %s; going on", name)

    # ---- turns

    async def _start_turn(self, messages: Sequence[str], cwd: Path | None = None) -> None:
        """Start a turn with `messages` (the lock is held); `cwd` moves the thread there, for
        this turn and the next."""
        assert self._thread_id is not None
        params: dict[str, Any] = {
            "threadId": self._thread_id,
            "input": text_input(messages),
            "clientUserMessageId": next(self._message_ids),
        }
        if cwd is not None:
            params["cwd"] = str(cwd)
        for attempt in itertools.count(1):
            try:
                result = await self._rpc.request("turn/start", params, timeout=RPC_TIMEOUT_S)
                break
            except RpcError as error:
                if error.code != OVERLOADED or attempt >= OVERLOADED_RETRIES:
                    raise
                await asyncio.sleep(0.2 * attempt)
        turn_id = str(result["turn"]["id"])
        if turn_id not in self._finished_turns:
            self._turn_id = turn_id
        log.info("codex turn %s started with %d messages", turn_id, len(messages))

    async def _start_turn_for_sender(self, messages: Sequence[str]) -> None:
        try:
            await self._start_turn(messages)
        except (RpcError, TimeoutError, KeyError, TypeError) as error:
            raise Refused(f"Codex did not start a turn with the message: {error}") from error
        except EngineGone as error:
            raise Refused(f"the Codex session ended before it took the message: {error}") from error

    async def _interrupt(self, turn_id: str) -> None:
        """Ask Codex to end `turn_id` now (the lock is held); its `turn/completed` then starts
        the next turn with the waiting messages."""
        if turn_id in self._interrupted:
            return
        assert self._thread_id is not None
        self._interrupted[turn_id] = list(self._commands.values())
        try:
            await self._rpc.request(
                "turn/interrupt",
                {"threadId": self._thread_id, "turnId": turn_id},
                timeout=RPC_TIMEOUT_S,
            )
            log.info("interrupted codex turn %s for a message", turn_id)
        except (RpcError, TimeoutError) as error:
            # The turn ended meanwhile: its completion (or this flush) starts the next one.
            log.info("codex did not interrupt turn %s (%s)", turn_id, error)
            await self._flush()
        except EngineGone as error:
            raise Refused(f"the Codex session ended before it took the message: {error}") from error

    async def _steer(self, turn_id: str, message: str) -> None:
        """Append `message` to the running turn, or keep it for the next (the lock is held)."""
        assert self._thread_id is not None
        client_id = next(self._message_ids)
        # Known before the answer: Codex may show the message before it answers.
        self._steered[client_id] = (turn_id, message)
        try:
            await self._rpc.request(
                "turn/steer",
                {
                    "threadId": self._thread_id,
                    "expectedTurnId": turn_id,
                    "input": text_input([message]),
                    "clientUserMessageId": client_id,
                },
                timeout=RPC_TIMEOUT_S,
            )
            log.info("steered codex turn %s", turn_id)
            return
        except (RpcError, TimeoutError) as error:
            # "no active turn to steer", "expected active turn id ... but found ...", a turn
            # that takes no input (compaction, review): the message starts the next turn.
            log.info("codex did not take the message into turn %s (%s)", turn_id, error)
        except EngineGone as error:
            self._steered.pop(client_id, None)
            raise Refused(f"the Codex session ended before it took the message: {error}") from error
        if self._steered.pop(client_id, None) is not None:
            self._pending.append(message)
        await self._flush()

    async def _flush(self) -> None:
        """Between turns (the lock is held): start the next turn with the waiting messages, or
        end the session once it is closing."""
        if self._turn_id is not None or self._done.done():
            return
        if self._pending:
            messages, self._pending = self._pending, []
            try:
                await self._start_turn(messages)
            except (RpcError, TimeoutError, KeyError, TypeError) as error:
                self._pending[:0] = messages
                self._turn_failure = f"Codex did not start a turn with waiting messages: {error}"
                log.error("%s", self._turn_failure)
            except EngineGone:
                log.warning("codex ended before %d waiting messages", len(messages))
            return
        if self._closing and not self._input_closed:
            self._input_closed = True
            self._rpc.close("the session is closed")
            self._closer = asyncio.create_task(self._end_once_idle(), name="codex-close")

    async def _end_once_idle(self) -> None:
        """Codex exits when its input closes; should it linger, it is ended like a stop."""
        try:
            await asyncio.wait_for(asyncio.shield(self._done), CLOSE_GRACE_S)
        except TimeoutError:
            log.warning("codex (pid %d) lingers after its input closed; ending it", self.pid)
            self._ended_after_close = True
            await self._tree.end(self._done, STOP_GRACE_S, self.label)

    def _schedule_flush(self) -> None:
        async def flush() -> None:
            async with self._lock:
                await self._flush()

        task = asyncio.create_task(flush(), name="codex-flush")
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    # ---- reading

    async def _read_stdout(self) -> None:
        async for text in self._stdout_lines():
            if wire.isEnabledFor(logging.DEBUG):
                wire.debug("%s", text, extra={"direction": "in"})
            try:
                message = json.loads(text)
            except ValueError:
                self._keep(text)
                log.warning("codex wrote a line that is not JSON: %.200s", text)
                continue
            if not isinstance(message, dict):
                continue
            line = describe(message)
            if line is not None:
                self._keep(line)
            method = message.get("method")
            if isinstance(method, str) and "id" in message:
                await self._answer(message["id"], method, message.get("params"))
            elif isinstance(method, str):
                params = message.get("params")
                self._on_notification(method, params if isinstance(params, Mapping) else {})
            elif "id" in message:
                self._rpc.resolve(message)

    async def _answer(self, request_id: object, method: str, params: object) -> None:
        """Codex asks the driver something: answer by policy, refuse what it does not handle,
        so that Codex never waits for us."""
        answer = answer_server_request(method, params if isinstance(params, Mapping) else {})
        with contextlib.suppress(EngineGone):
            if answer is None:
                log.info("refusing codex's request %s", method)
                await self._rpc.refuse(
                    request_id, METHOD_NOT_FOUND, f"shadowclone does not handle {method}"
                )
            else:
                log.info("answering codex's request %s by policy", method)
                await self._rpc.respond(request_id, answer)

    def _on_notification(self, method: str, params: Mapping[str, Any]) -> None:
        thread = params.get("threadId")
        if thread is not None and self._thread_id is not None and thread != self._thread_id:
            # A sub-agent's thread (the model may spawn some): its turns are not ours to end,
            # steer or count.
            log.debug("codex thread %s: %s", thread, method)
            return
        if method == "mcpServer/startupStatus/updated":
            self._mcp_status[str(params.get("name"))] = str(params.get("status"))
            self._mcp_changed.set()
            if params.get("status") == "failed":
                log.warning("MCP server %s failed: %s", params.get("name"), params.get("error"))
        elif method == "turn/started":
            turn_id = str((params.get("turn") or {}).get("id"))
            if turn_id not in self._finished_turns:
                self._turn_id = turn_id
        elif method in ("item/started", "item/completed"):
            item = params.get("item") or {}
            if item.get("type") == "userMessage":
                self._steered.pop(str(item.get("clientId")), None)
            elif item.get("type") not in _NOT_TOOLS:
                item_id = str(item.get("id"))
                if method == "item/started":
                    self._tools_running.add(item_id)
                    if item.get("type") == "commandExecution" and item.get("command"):
                        self._commands[item_id] = str(item.get("command"))
                else:
                    self._tools_running.discard(item_id)
                    self._commands.pop(item_id, None)
        elif method == "error":
            self._on_error(params)
        for event in self._normalizer.events(method, params):
            self._events.put_nowait(event)
        if method == "turn/completed":
            self._on_turn_completed(params)

    def _on_error(self, params: Mapping[str, Any]) -> None:
        error = turn_error(params)
        if params.get("willRetry"):
            log.info("codex retries after an error: %s", error)
        else:
            self._last_error = error
            log.warning("codex reported an error: %s", error)

    def _on_turn_completed(self, params: Mapping[str, Any]) -> None:
        turn = params.get("turn") or {}
        turn_id = str(turn.get("id"))
        status = turn.get("status")
        self._finished_turns.add(turn_id)
        if self._turn_id == turn_id:
            self._turn_id = None
            self._tools_running.clear()
            self._commands.clear()
        self._end_commands(self._interrupted.pop(turn_id, []))
        if status == "failed":
            self._turn_failure = turn_error(params) or self._last_error or "the turn failed"
            log.warning("codex turn %s failed: %s", turn_id, self._turn_failure)
        elif status == "completed":
            self._turn_failure = ""
        unseen = [
            client_id for client_id, (steered, _) in self._steered.items() if steered == turn_id
        ]
        if unseen:
            log.warning("codex ended turn %s before %d steered messages", turn_id, len(unseen))
            self._pending[:0] = [self._steered.pop(client_id)[1] for client_id in unseen]
        self._schedule_flush()

    def _end_commands(self, commands: Sequence[str]) -> None:
        """End the shell commands of a turn interrupted for a message: Codex leaves them
        running in the background, where the model no longer follows them."""
        if not commands:
            return
        self._tree.refresh()
        for process in self._tree.alive():
            with contextlib.suppress(psutil.Error):
                argv = process.cmdline()
                if process.pid == self.pid or not argv or shlex.join(argv) not in commands:
                    continue
                doomed = [process, *process.children(recursive=True)]
                log.info("ending the interrupted command %r (pid %d)", argv, process.pid)
                for each in doomed:
                    with contextlib.suppress(psutil.Error):
                        each.kill()

    # ---- the end

    async def _exited(self) -> int:
        returncode = await super()._exited()
        self._rpc.fail_pending("the codex app-server exited")  # no request waits for an answer
        return returncode

    def _outcome(self, returncode: int) -> tuple[Outcome, str]:
        if self._stopping:
            return Outcome.STOPPED, ""
        if self._start_error:
            return Outcome.FAILED, self._with_tail(
                f"Codex could not open the session: {self._start_error}"
            )
        if (
            self._input_closed
            and self._turn_id is None
            and (returncode == 0 or self._ended_after_close)
        ):
            if self._turn_failure:
                return Outcome.FAILED, self._with_tail(
                    f"Codex's last turn failed: {self._turn_failure}"
                )
            return Outcome.DONE, ""
        return Outcome.FAILED, self._failure(
            returncode, self._turn_id is not None, self._last_error
        )
