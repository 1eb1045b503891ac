"""The example engine: drives `shadowclone-example-agent` (agent.py) through its JSON lines,
on the shared process handling of `shadowclone.plugin.ProcessSession`."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

from shadowclone.plugin import (
    EngineTask,
    Outcome,
    ProcessSession,
    ProcessTree,
    Refused,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
    contract,
    one_line,
    spawn_engine,
)

log = logging.getLogger(__name__)

PROGRAM = "shadowclone-example-agent"
TOOL_TIMEOUT_MARGIN_S = 60.0
"""How much longer than the ask's wait limit one MCP call may run: the ask server answers only
after its own clock ran out."""


def engine_env(task: EngineTask, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The agent's environment: the task's variables, its MCP server and the tool timeout."""
    env = dict(base if base is not None else task.env)
    env.update(task.env)
    mcp_file = task.state_dir / "mcp.json"
    env["EXAMPLE_AGENT_MCP"] = str(mcp_file)
    env["EXAMPLE_AGENT_TOOL_TIMEOUT_S"] = str(task.limits.ask_timeout_s + TOOL_TIMEOUT_MARGIN_S)
    if task.model:
        env["EXAMPLE_AGENT_MODEL"] = task.model
    return env


def mcp_config(task: EngineTask) -> dict[str, Any]:
    if task.ask_url:
        return {"name": contract.ASK_SERVER, "url": task.ask_url, "headers": dict(task.ask_headers)}
    return {"name": contract.ASK_SERVER, "command": list(task.ask_command)}


class ExampleEngine:
    """Starts agent sessions (the `Engine` protocol)."""

    async def launch(self, task: EngineTask) -> ExampleSession:
        task.state_dir.mkdir(parents=True, exist_ok=True)
        env = engine_env(task, base={**task.env})
        (task.state_dir / "mcp.json").write_text(json.dumps(mcp_config(task)), encoding="utf-8")
        process, tree = await spawn_engine(
            PROGRAM,
            [],
            cwd=task.workspace,
            env=env,
            install_hint="install shadowclone-example, which has it",
            run_as=task.run_as,
        )
        session = ExampleSession(process, tree)
        await session.send(task.prompt)
        return session


class ExampleSession(ProcessSession):
    """One running agent (the `EngineSession` protocol)."""

    label = "the example agent"

    def __init__(self, process: asyncio.subprocess.Process, tree: ProcessTree) -> None:
        super().__init__(process, tree)
        self._closed = False
        self._in_turn = False
        self._last_error = ""

    @property
    def session_id(self) -> str | None:
        return None

    async def send(self, message: str) -> None:
        """The agent takes a message at once: mid-turn it interrupts the turn with it."""
        stdin = self._process.stdin
        if stdin is None or self._closed or self._done.done():
            raise Refused("the example agent takes no more messages: it is ending")
        try:
            stdin.write(json.dumps({"type": "user", "text": message}).encode() + b"\n")
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as error:
            raise Refused(f"the example agent stopped reading: {error}") from error
        self._in_turn = True

    async def close(self) -> None:
        if not self._closed and self._process.stdin is not None:
            self._closed = True
            self._process.stdin.close()

    async def stop(self) -> None:
        if not self._done.done():
            await self._end()

    async def _read_stdout(self) -> None:
        async for text in self._stdout_lines():
            self._keep(text)
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if isinstance(line, dict):
                self._on_line(line)

    def _on_line(self, line: dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "text":
            self._events.put_nowait(TextEvent(str(line.get("text", ""))))
        elif kind == "tool":
            detail = one_line(str(line.get("detail", "")))
            self._events.put_nowait(ToolUseEvent(str(line.get("name", "")), detail))
        elif kind == "usage":
            tokens_in, tokens_out = line.get("input_tokens", 0), line.get("output_tokens", 0)
            self._events.put_nowait(UsageEvent(int(tokens_in), int(tokens_out)))
        elif kind == "error":
            self._last_error = str(line.get("message", ""))
        elif kind == "turn_end":
            interrupted = bool(line.get("interrupted"))
            self._in_turn = self._in_turn and interrupted
            self._events.put_nowait(TurnEndedEvent(interrupted))

    def _outcome(self, returncode: int) -> tuple[Outcome, str]:
        if self._stopping:
            return Outcome.STOPPED, ""
        if returncode == 0 and self._closed:
            if self._last_error:
                return Outcome.FAILED, f"the last turn failed: {self._last_error}"
            return Outcome.DONE, ""
        return Outcome.FAILED, self._failure(returncode, self._in_turn, self._last_error)
