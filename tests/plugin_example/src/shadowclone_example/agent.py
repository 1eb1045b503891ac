"""A very small coding agent, the program the example engine drives: it speaks the Anthropic
Messages API (streamed), runs shell commands, calls the tools of one MCP server, and talks to
its driver in JSON lines.

Input, one JSON object a line: `{"type": "user", "text": ...}`. A line that comes while a turn
runs interrupts it (the model's reply so far is dropped, a running command is killed, an MCP
call is cancelled) and starts the next turn with the text. End of input: the agent finishes
its turn and exits 0.

Output: `{"type": "text", "text"}`, `{"type": "tool", "name", "detail"}`, `{"type": "usage",
"input_tokens", "output_tokens"}`, `{"type": "turn_end", "interrupted"}`, `{"type": "error",
"message"}`.

Settings come from the environment (see `Settings`); the MCP server from a JSON file:
`{"name": ..., "command": [...]}` or `{"name": ..., "url": ..., "headers": {...}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

BASH = {
    "name": "Bash",
    "description": "Run a shell command in the workspace; its output comes back.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}
INTERRUPTED = "interrupted: the owner sent a message"
OUTPUT_LIMIT = 20_000


@attrs.frozen
class Settings:
    base_url: str
    api_key: str
    model: str
    tool_timeout_s: float
    mcp_file: str

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            base_url=os.environ.get("EXAMPLE_AGENT_BASE_URL", "https://api.anthropic.com"),
            api_key=os.environ.get("EXAMPLE_AGENT_API_KEY", ""),
            model=os.environ.get("EXAMPLE_AGENT_MODEL", "claude-sonnet-4-5"),
            tool_timeout_s=float(os.environ.get("EXAMPLE_AGENT_TOOL_TIMEOUT_S", "600")),
            mcp_file=os.environ.get("EXAMPLE_AGENT_MCP", ""),
        )


def log_cancelled() -> None:
    print("the turn was interrupted", file=sys.stderr, flush=True)


def say(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Agent:
    def __init__(self, settings: Settings, http: httpx2.AsyncClient, mcp: McpTools | None):
        self.settings = settings
        self.http = http
        self.mcp = mcp
        self.messages: list[dict[str, Any]] = []

    def tools(self) -> list[dict[str, Any]]:
        return [BASH, *(self.mcp.schemas if self.mcp else [])]

    async def turn(self) -> None:
        """Model requests and tool calls until the model ends its turn."""
        while True:
            content, stop_reason = await self.ask_model()
            self.messages.append({"role": "assistant", "content": content})
            for block in content:
                if block["type"] == "text" and block["text"]:
                    say(type="text", text=block["text"])
            uses = [block for block in content if block["type"] == "tool_use"]
            if stop_reason != "tool_use" or not uses:
                return
            results: list[dict[str, Any]] = []
            self.messages.append({"role": "user", "content": results})
            for use in uses:
                output = await self.run_tool(use["name"], use["input"])
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": output})

    async def ask_model(self) -> tuple[list[dict[str, Any]], str]:
        body = {
            "model": self.settings.model,
            "max_tokens": 4096,
            "stream": True,
            "messages": self.messages,
            "tools": self.tools(),
        }
        headers = {"x-api-key": self.settings.api_key, "anthropic-version": "2023-06-01"}
        blocks: dict[int, dict[str, Any]] = {}
        partial: dict[int, str] = {}
        stop_reason = "end_turn"
        usage = {"input_tokens": 0, "output_tokens": 0}
        url = self.settings.base_url.rstrip("/") + "/v1/messages"
        async with self.http.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")
                raise RuntimeError(f"the model answered {response.status_code}: {text[:500]}")
            async for event in sse_events(response.aiter_lines()):
                kind = event.get("type")
                if kind == "message_start":
                    usage["input_tokens"] = event["message"]["usage"].get("input_tokens", 0)
                elif kind == "content_block_start":
                    blocks[event["index"]] = dict(event["content_block"])
                elif kind == "content_block_delta":
                    delta = event["delta"]
                    if delta["type"] == "text_delta":
                        blocks[event["index"]]["text"] += delta["text"]
                    elif delta["type"] == "input_json_delta":
                        partial[event["index"]] = partial.get(event["index"], "")
                        partial[event["index"]] += delta["partial_json"]
                elif kind == "content_block_stop" and event["index"] in partial:
                    blocks[event["index"]]["input"] = json.loads(partial[event["index"]] or "{}")
                elif kind == "message_delta":
                    stop_reason = event["delta"].get("stop_reason") or stop_reason
                    usage["output_tokens"] = event.get("usage", {}).get("output_tokens", 0)
        say(type="usage", **usage)
        return [blocks[index] for index in sorted(blocks)], stop_reason

    async def run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if name == "Bash":
            command = str(arguments.get("command", ""))
            say(type="tool", name="Bash", detail=command)
            return await run_shell(command)
        say(type="tool", name=name, detail=json.dumps(arguments)[:300])
        if self.mcp is None or name not in self.mcp.names:
            return f"error: no tool named {name}"
        return await self.mcp.call(name, arguments, self.settings.tool_timeout_s)

    def interrupted(self, text: str) -> None:
        """The owner's message ends the turn, which always stands at a user message then (the
        prompt, or the results of the tool calls under way, appended before they run): every
        tool call without a result gets one, and the message joins that user message (the
        API wants turns to alternate)."""
        last = self.messages[-1]
        answered = {block.get("tool_use_id") for block in last["content"]}
        asked = self.messages[-2]["content"] if len(self.messages) > 1 else []
        last["content"].extend(
            {"type": "tool_result", "tool_use_id": use["id"], "content": INTERRUPTED}
            for use in asked
            if use.get("type") == "tool_use" and use["id"] not in answered
        )
        self.begin(text)

    def begin(self, text: str) -> None:
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages[-1]["content"].append({"type": "text", "text": text})
        else:
            self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    async for line in lines:
        if line.startswith("data:"):
            data = line[5:].strip()
            if data:
                yield json.loads(data)


async def run_shell(command: str) -> str:
    process = await asyncio.create_subprocess_shell(
        command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await process.communicate()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        raise
    text = output.decode(errors="replace")[-OUTPUT_LIMIT:]
    return f"{text}\n(exit code {process.returncode})"


class McpTools:
    """The tools of one MCP server, named as Claude Code names them: mcp__SERVER__TOOL."""

    def __init__(self, client: Client, server: str) -> None:
        self.client = client
        self.server = server
        self.schemas: list[dict[str, Any]] = []
        self.names: dict[str, str] = {}

    async def load(self) -> None:
        listed = await self.client.list_tools()
        for tool in listed.tools:
            name = f"mcp__{self.server}__{tool.name}"
            self.names[name] = tool.name
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            self.schemas.append(
                {"name": name, "description": tool.description or "", "input_schema": schema}
            )

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> str:
        result = await self.client.call_tool(
            self.names[name], arguments, read_timeout_seconds=timeout_s
        )
        texts = [getattr(block, "text", "") for block in result.content]
        return ("error: " if result.is_error else "") + "\n".join(texts)


def mcp_client(config: dict[str, Any]) -> Client:
    if "url" in config:
        http = httpx2.AsyncClient(headers=config.get("headers") or {}, timeout=None)
        return Client(streamable_http_client(config["url"], http_client=http))
    command = list(config["command"])
    return Client(StdioServerParameters(command=command[0], args=command[1:]))


async def lines_of_stdin(queue: asyncio.Queue[str | None]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async for raw in reader:
        with contextlib.suppress(ValueError):
            line = json.loads(raw)
            if isinstance(line, dict) and line.get("type") == "user":
                await queue.put(str(line.get("text", "")))
    await queue.put(None)


async def run_turn(
    agent: Agent, queue: asyncio.Queue[str | None], ending: bool
) -> tuple[str | None, bool]:
    """One turn, and each turn a message interrupts; returns a message that came as it ended
    (the next turn's), and whether the input has ended."""
    while True:
        turn = asyncio.create_task(agent.turn())
        following: str | None = None
        interrupted = False
        while not turn.done() and not interrupted:
            if ending:
                await asyncio.wait({turn})
                break
            incoming = asyncio.create_task(queue.get())
            await asyncio.wait({turn, incoming}, return_when=asyncio.FIRST_COMPLETED)
            if not incoming.done():
                incoming.cancel()
                continue
            message = incoming.result()
            if message is None:
                ending = True
            elif turn.done():
                following = message
            else:
                turn.cancel()
                try:
                    await turn
                except asyncio.CancelledError:
                    log_cancelled()
                except Exception as broken:  # noqa: BLE001 - told to the driver
                    say(type="error", message=str(broken) or type(broken).__name__)
                agent.interrupted(message)
                say(type="turn_end", interrupted=True)
                interrupted = True
        if interrupted:
            continue  # the next turn carries the message
        error = turn.exception()
        if error is not None:
            say(type="error", message=str(error) or type(error).__name__)
        say(type="turn_end", interrupted=False)
        return following, ending


async def serve(settings: Settings) -> int:
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    stdin = asyncio.create_task(lines_of_stdin(queue))
    async with contextlib.AsyncExitStack() as stack:
        mcp = None
        if settings.mcp_file:
            config = json.loads(Path(settings.mcp_file).read_text(encoding="utf-8"))
            client = await stack.enter_async_context(mcp_client(config))
            mcp = McpTools(client, config["name"])
            await mcp.load()
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=None))
        agent = Agent(settings, http, mcp)
        text = await queue.get()
        ending = text is None
        while text is not None:
            agent.begin(text)
            text, ending = await run_turn(agent, queue, ending)
            if text is None and not ending:
                text = await queue.get()
                ending = text is None
    stdin.cancel()
    return 0


def main() -> None:
    sys.exit(asyncio.run(serve(Settings.from_env())))


if __name__ == "__main__":
    main()
