"""The Claude Code driver: `claude -p` in stream-json mode, steered by interrupts.

One `claude` process serves a whole clone: each user line on its stdin starts a turn, and a
`result` line on its stdout ends one. A message from the owner during a turn must interrupt it
(a plain user line would only be folded into the running turn at its next tool call), so the
driver sends the `interrupt` control request, waits for that turn's `result`, and then writes the
message as the next user turn of the same session (docs/engines.md). Messages that arrive
meanwhile are queued and go out together; none is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shadowclone.plugin import (
    EngineTask,
    Outcome,
    ProcessSession,
    ProcessTree,
    Refused,
    contract,
    spawn_engine,
)

from shadowclone_claude.stream import StreamNormalizer

log = logging.getLogger(__name__)

PROGRAM = "claude"
ASK_SERVER = contract.ASK_SERVER
"""The MCP server name the engine sees: its tool is `mcp__shadowclone_ask__ask`."""
PROJECTS = "projects"
"""Where, in its config folder, Claude Code keeps each working folder's session transcripts."""
TOOL_TIMEOUT_MARGIN_S = 60.0
"""Added to the ask wait limit, so Claude Code never cuts the ask tool short itself."""


def command_line(task: EngineTask, program: str = PROGRAM) -> list[str]:
    """The argv that runs Claude Code on `task`."""
    argv = [
        program,
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        # The clone's container is the sandbox; nobody is there to approve a tool.
        "--permission-mode",
        "bypassPermissions",
    ]
    server: dict[str, Any] | None = None
    if task.ask_url:
        server = {"type": "http", "url": task.ask_url, "headers": dict(task.ask_headers)}
    elif task.ask_command:
        command, *args = task.ask_command
        server = {"type": "stdio", "command": command, "args": args}
    if server is not None:
        argv += ["--mcp-config", json.dumps({"mcpServers": {ASK_SERVER: server}})]
    # Never a server of the repository's `.mcp.json` (nor of a user config).
    argv.append("--strict-mcp-config")
    if not task.project_settings:
        # Only the clone's own user settings (its CLAUDE_CONFIG_DIR, which the driver leaves
        # empty): no project or local settings (hooks, plugins, permissions), skills, agents,
        # commands or CLAUDE.md of the workspace, whose head is a stranger's.
        argv += ["--setting-sources", "user"]
    if not task.web_tools:
        argv += ["--disallowedTools", "WebFetch,WebSearch"]
    if task.model:
        argv += ["--model", task.model]
    if task.limits.max_turns is not None:
        argv += ["--max-turns", str(task.limits.max_turns)]
    if task.resume:
        argv += ["--resume", task.resume]
    return argv


def config_dir(task: EngineTask) -> Path:
    """Claude Code's own settings and session files, private to this clone."""
    return task.state_dir / "claude"


def project_folder(workspace: Path) -> str:
    """The name Claude Code gives a working folder's sessions under `projects/`: the path with
    every character but a letter or digit made `-`."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(workspace))


def engine_env(task: EngineTask, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the `claude` process: ours, the task's, and the switches that keep a
    headless Claude Code quiet, private and patient with the ask tool."""
    env = dict(os.environ if base is None else base)
    # Set when the run program itself runs under Claude Code; it would change the child's mode.
    env.pop("CLAUDECODE", None)
    env.update(task.env)
    tool_timeout_ms = int((task.limits.ask_timeout_s + TOOL_TIMEOUT_MARGIN_S) * 1000)
    env.update(
        {
            "CLAUDE_CONFIG_DIR": str(config_dir(task)),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            # bypassPermissions refuses to run as root without it (CI runs as root).
            "IS_SANDBOX": "1",
            "MCP_TOOL_TIMEOUT": str(tool_timeout_ms),
            # Otherwise MCP tools hide behind ToolSearch and the model may not find `ask`.
            "ENABLE_TOOL_SEARCH": "false",
        }
    )
    return env


class ClaudeEngine:
    """Starts Claude Code sessions (the `Engine` protocol)."""

    def __init__(self, program: str = PROGRAM) -> None:
        self.program = program

    async def launch(self, task: EngineTask) -> ClaudeSession:
        config_dir(task).mkdir(parents=True, exist_ok=True)
        program, *args = command_line(task, self.program)
        process, tree = await spawn_engine(
            program,
            args,
            cwd=task.workspace,
            env=engine_env(task),
            install_hint="install @anthropic-ai/claude-code (scripts/install-engines does it "
            "for the tests)",
            run_as=task.run_as,
        )
        log.info("started Claude Code (pid %d) in %s", process.pid, task.workspace)
        session = ClaudeSession(process, tree)
        await session.begin(task.prompt)
        return session

    def session_files(self, task: EngineTask, session_id: str) -> list[str]:
        """The session's transcript: Claude Code resumes from it alone."""
        found = sorted(config_dir(task).glob(f"{PROJECTS}/*/{session_id}.jsonl"))
        return [path.relative_to(task.state_dir).as_posix() for path in found[:1]]

    def session_place(self, task: EngineTask, session_id: str, name: str) -> str:
        """The transcript goes in the folder Claude Code keeps for the new workspace's
        sessions (it finds one in any project's folder, but looks there first)."""
        folder = config_dir(task).relative_to(task.state_dir) / PROJECTS
        return (folder / project_folder(task.workspace) / f"{session_id}.jsonl").as_posix()


class _Turn(enum.Enum):
    IDLE = "idle"
    """Between turns: a user line starts the next one."""
    RUNNING = "running"
    INTERRUPTING = "interrupting"
    """The interrupt is sent; the turn's `result` line has not come yet."""


class ClaudeSession(ProcessSession):
    """One running `claude` process (the `EngineSession` protocol)."""

    label = "Claude Code"

    def __init__(self, process: asyncio.subprocess.Process, tree: ProcessTree) -> None:
        super().__init__(process, tree)
        self._normalizer = StreamNormalizer()
        self._lock = asyncio.Lock()
        self._turn = _Turn.IDLE
        self._closing = False
        self._stdin_closed = False
        self._request_ids = itertools.count(1)
        self._last_error = ""
        self._session_id: str | None = None

    @property
    def session_id(self) -> str | None:
        return self._session_id

    # ---- the EngineSession protocol

    async def send(self, message: str) -> None:
        async with self._lock:
            if self._done.done() or self._closing:
                raise Refused("the Claude Code session takes no more messages: it is ending")
            if self._turn is _Turn.IDLE:
                await self._write_user([message])
                return
            self._pending.append(message)
            if self._turn is _Turn.RUNNING:
                self._turn = _Turn.INTERRUPTING
                await self._write(
                    {
                        "type": "control_request",
                        "request_id": f"shadowclone_interrupt_{next(self._request_ids)}",
                        "request": {"subtype": "interrupt"},
                    }
                )
        await self._until_taken(message)

    async def close(self) -> None:
        async with self._lock:
            self._closing = True
            if self._turn is _Turn.IDLE and not self._pending:
                self._close_stdin()

    async def stop(self) -> None:
        if self._done.done():
            return
        await self._end()

    # ---- writing

    async def begin(self, prompt: str) -> None:
        async with self._lock:
            await self._write_user([prompt])

    async def _write(self, line: Mapping[str, Any]) -> None:
        stdin = self._process.stdin
        if stdin is None or self._stdin_closed:
            raise Refused("the Claude Code session's input is closed")
        try:
            stdin.write(json.dumps(line).encode() + b"\n")
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as error:
            raise Refused(f"Claude Code stopped reading its input: {error}") from error

    async def _write_user(self, messages: Sequence[str]) -> None:
        """Start a turn with `messages`, one text block each."""
        content: str | list[dict[str, str]] = (
            messages[0]
            if len(messages) == 1
            else [{"type": "text", "text": message} for message in messages]
        )
        await self._write(
            {
                "type": "user",
                "message": {"role": "user", "content": content},
                "parent_tool_use_id": None,
                "session_id": "default",
            }
        )
        self._turn = _Turn.RUNNING

    def _close_stdin(self) -> None:
        if self._process.stdin is not None and not self._stdin_closed:
            self._stdin_closed = True
            self._process.stdin.close()

    # ---- reading

    async def _read_stdout(self) -> None:
        async for text in self._stdout_lines():
            self._keep(text)
            if not text.startswith("{"):
                log.debug("claude: %s", text)
                continue
            try:
                line = json.loads(text)
            except ValueError:
                log.warning("claude wrote a line that is not JSON: %.200s", text)
                continue
            if isinstance(line, dict):
                await self._on_line(line)

    async def _on_line(self, line: dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "result":
            await self._on_result(line)
            return
        if kind == "control_request":
            await self._answer_control_request(line)
        elif kind == "control_response":
            response = line.get("response") or {}
            if response.get("subtype") == "error":
                log.warning("Claude Code refused a control request: %s", response.get("error"))
        elif kind == "system" and line.get("subtype") == "init":
            self._check_init(line)
        if isinstance(session := line.get("session_id"), str) and session:
            self._session_id = session
        for event in self._normalizer.events(line):
            self._events.put_nowait(event)

    async def _on_result(self, result: dict[str, Any]) -> None:
        if result.get("is_error") and self._turn is not _Turn.INTERRUPTING:
            self._last_error = str(result.get("result") or result.get("errors") or "")
            log.warning("Claude Code ended a turn with an error: %.500s", self._last_error)
        elif not result.get("is_error"):
            self._last_error = ""  # a later turn went well: the error is behind us
        for event in self._normalizer.events(result):
            self._events.put_nowait(event)
        async with self._lock:
            if self._pending:
                messages, self._pending = self._pending, []
                try:
                    await self._write_user(messages)
                except Refused:
                    # The process is going away; the outcome will say so.
                    log.warning("Claude Code ended before %d queued messages", len(messages))
                    self._turn = _Turn.IDLE
                return
            self._turn = _Turn.IDLE
            if self._closing:
                self._close_stdin()

    async def _answer_control_request(self, line: Mapping[str, Any]) -> None:
        """Claude Code asks the driver something: allow every tool (the container is the
        sandbox) and refuse what this driver does not offer, so it never waits for us."""
        request = line.get("request") or {}
        request_id = line.get("request_id")
        if request.get("subtype") == "can_use_tool":
            response: dict[str, Any] = {
                "subtype": "success",
                "request_id": request_id,
                "response": {"behavior": "allow", "updatedInput": request.get("input") or {}},
            }
        else:
            response = {
                "subtype": "error",
                "request_id": request_id,
                "error": f"shadowclone does not handle {request.get('subtype')!r}",
            }
        async with self._lock:
            with contextlib.suppress(Refused):
                await self._write({"type": "control_response", "response": response})

    def _check_init(self, line: Mapping[str, Any]) -> None:
        for server in line.get("mcp_servers") or []:
            if isinstance(server, Mapping) and server.get("status") != "connected":
                log.warning(
                    "MCP server %s is %s in Claude Code", server.get("name"), server.get("status")
                )

    # ---- the end

    def _outcome(self, returncode: int) -> tuple[Outcome, str]:
        if self._stopping:
            return Outcome.STOPPED, ""
        if returncode == 0 and self._stdin_closed:
            if self._last_error:  # as the Codex driver does: a failed last turn is a failure
                return Outcome.FAILED, f"the last turn failed: {self._last_error}"
            return Outcome.DONE, ""
        return Outcome.FAILED, self._failure(
            returncode, self._turn is not _Turn.IDLE, self._last_error
        )
