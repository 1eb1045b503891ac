"""One `codex app-server` process and the JSON-RPC connection to it: reading what it writes,
answering its requests, the handshake and the thread, and closing its input at the end.

Apart from the turns (session.py) because it is the same for every conversation: an early
start (`EarlyCodex`) runs all of it before the workspace exists.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import importlib.metadata
import json
import logging
import signal
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from shadowclone.plugin import STOP_GRACE_S, EngineTask, ProcessSession, ProcessTree

from shadowclone_codex.config import ASK_SERVER
from shadowclone_codex.notifications import METHOD_NOT_FOUND, answer_server_request, describe
from shadowclone_codex.rpc import EngineGone, Rpc, RpcError, wire

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 60.0
THREAD_START_TIMEOUT_S = 180.0
"""`thread/start` waits for the required MCP servers to start (60 s each at most)."""
MCP_READY_TIMEOUT_S = 15.0
"""How long to wait for the ask server's "ready" once the thread exists. Being required, it is
up by then; the wait only guards against a status that arrives late."""
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


def _client_version() -> str:
    try:
        return importlib.metadata.version("shadowclone-codex")
    except importlib.metadata.PackageNotFoundError:
        return "0"


class StartFailed(Exception):
    """The session could not be opened: thread, ask server or first turn."""


class CodexConnection(ProcessSession):
    """The app-server's process, its JSON-RPC connection and its one thread; subclasses
    handle the thread's notifications (`_on_notification`) and judge the end."""

    label = "the codex app-server"

    def __init__(self, process: asyncio.subprocess.Process, tree: ProcessTree) -> None:
        assert process.stdin is not None
        super().__init__(process, tree)
        self._rpc = Rpc(process.stdin)
        self._thread_id: str | None = None
        self._mcp_status: dict[str, str] = {}
        self._mcp_changed = asyncio.Event()
        self._start_error = ""
        self._input_closed = False
        self._ended_after_close = False
        self._closer: asyncio.Task[None] | None = None

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def session_id(self) -> str | None:
        return self._thread_id

    # ---- opening the session

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
                self._notified(method, params if isinstance(params, Mapping) else {})
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

    def _notified(self, method: str, params: Mapping[str, Any]) -> None:
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
        self._on_notification(method, params)

    @abc.abstractmethod
    def _on_notification(self, method: str, params: Mapping[str, Any]) -> None:
        """A notification of this session's thread (or of none)."""

    # ---- the end

    def _close_input(self) -> None:
        """Close Codex's input, which ends it once it is idle."""
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

    async def _exited(self) -> int:
        returncode = await super()._exited()
        self._rpc.fail_pending("the codex app-server exited")  # no request waits for an answer
        return returncode
