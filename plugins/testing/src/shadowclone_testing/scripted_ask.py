"""How the scripted engine calls the real `shadowclone_ask` server: over HTTP where the run
program serves it, or started over stdio with the MCP SDK's client, as a real engine would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

import attrs
import httpx2
from shadowclone.plugin import contract
from shadowclone.plugin.types import EngineTask

from shadowclone_testing.scripted_steps import ScriptFailed

TOOL_NAME = contract.ASK_TOOL

ASK_START_TIMEOUT_S = 30.0
MCP_PROTOCOL_VERSION = "2025-06-18"
"""How long the ask server may take to start and answer the handshake."""
ASK_TIMEOUT_MARGIN_S = 60.0
"""Added to the ask wait limit: the server itself takes the recommended option in time."""
LOG_TAIL_CHARS = 2000


async def call_ask_server(
    task: EngineTask, step: int, arguments: dict[str, Any]
) -> tuple[ToolResult, str]:
    """Call the ask server where the task says it runs (`ask_url`), or start it from
    `task.ask_command`, as a real engine would, and call it; with the end of its log."""
    if task.ask_url:
        try:
            return await _call_http(task, arguments), ""
        except Exception as error:
            raise ScriptFailed(f"step {step}: the ask server failed: {_leaves(error)}") from error
    if not task.ask_command:
        raise ScriptFailed(f"step {step}: no ask server (the task's ask_command is empty)")
    task.state_dir.mkdir(parents=True, exist_ok=True)
    log_path = task.state_dir / "ask-server.log"
    with log_path.open("a", encoding="utf-8") as errlog:
        try:
            result = await _call_stdio(task, errlog, arguments)
        except Exception as error:
            errlog.flush()
            tail = _tail(log_path)
            detail = f"; its log ends:\n{tail}" if tail else ""
            raise ScriptFailed(
                f"step {step}: the ask server failed: {_leaves(error)}{detail}"
            ) from error
    return result, _tail(log_path)


async def _call_http(task: EngineTask, arguments: dict[str, Any]) -> ToolResult:
    """MCP's streamable HTTP transport as its clients speak it: initialize, say so, call."""
    wait_s = task.limits.ask_timeout_s + ASK_TIMEOUT_MARGIN_S
    headers = {**task.ask_headers, "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(ASK_START_TIMEOUT_S, read=wait_s)
    ) as http:
        hello = {
            "protocolVersion": MCP_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "scripted", "version": "1"},
        }
        await _rpc(http, task.ask_url, 1, "initialize", hello)
        notified = await http.post(
            task.ask_url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        notified.raise_for_status()
        call = {"name": TOOL_NAME, "arguments": arguments}
        result = await _rpc(http, task.ask_url, 2, "tools/call", call)
    blocks = result.get("content") if isinstance(result, dict) else None
    if not isinstance(blocks, list):
        raise ValueError(f"a tools/call result with no content: {result!r:.200}")
    text = "\n".join(str(block.get("text", "")) for block in blocks if isinstance(block, dict))
    return ToolResult(text, bool(result.get("isError")))


async def _call_stdio(task: EngineTask, errlog: TextIO, arguments: dict[str, Any]) -> ToolResult:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import TextContent

    command, *args = (*task.run_as, *task.ask_command)
    params = StdioServerParameters(command=command, args=args, cwd=task.workspace)
    wait_s = task.limits.ask_timeout_s + ASK_TIMEOUT_MARGIN_S
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
