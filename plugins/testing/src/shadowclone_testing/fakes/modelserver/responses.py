"""Rendering replies in the OpenAI Responses API."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from shadowclone_testing.fakes.modelserver.replies import CallTool, Shell, Text
from shadowclone_testing.fakes.modelserver.requests import ModelRequest
from shadowclone_testing.fakes.modelserver.stream import (
    Stream,
    ToolNotOffered,
    chunks,
    mcp_name_part,
)

if TYPE_CHECKING:
    from shadowclone_testing.fakes.modelserver.server import FakeModelServer


class ResponsesWriter:
    """Renders replies as Responses API results (docs/engines.md)."""

    SHELL_TOOLS: Mapping[str, Callable[[str], dict[str, Any]]] = {
        "exec_command": lambda command: {"cmd": command},
        "shell_command": lambda command: {"command": command},
        "shell": lambda command: {"command": ["bash", "-lc", command]},
    }

    def __init__(self, server: FakeModelServer, request: ModelRequest) -> None:
        self.server = server
        self.request = request
        self.response_id = server.new_id("resp")
        tools = request.body.get("tools")
        self.tools: list[Mapping[str, Any]] = [
            tool for tool in (tools if isinstance(tools, list) else []) if isinstance(tool, Mapping)
        ]

    def shell_call(self, command: str) -> dict[str, Any]:
        offered = {tool.get("name") for tool in self.tools if tool.get("type") == "function"}
        for name, arguments in self.SHELL_TOOLS.items():
            if name in offered:
                return {"name": name, "arguments": json.dumps(arguments(command))}
        raise ToolNotOffered(
            f"no shell tool among the request's tools: {sorted(map(str, offered))}"
        )

    def mcp_call(self, reply: CallTool) -> dict[str, Any]:
        namespace = f"mcp__{mcp_name_part(reply.server)}"
        flat = f"{namespace}__{mcp_name_part(reply.tool)}"
        arguments = json.dumps(dict(reply.arguments))
        for tool in self.tools:
            name = str(tool.get("name", ""))
            if tool.get("type") == "function" and name == flat:
                return {"name": name, "arguments": arguments}
            if tool.get("type") == "namespace" and name.rstrip("_") == namespace:
                return {"namespace": name, "name": reply.tool, "arguments": arguments}
        raise ToolNotOffered(
            f"no MCP server {reply.server!r} among the request's tools: {self.request.tool_names()}"
        )

    def items(self, reply: Text | Shell | CallTool) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        text = reply.text
        if text or isinstance(reply, Text):
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": self.server.new_id("msg"),
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        if isinstance(reply, Shell | CallTool):
            call = (
                self.shell_call(reply.command) if isinstance(reply, Shell) else self.mcp_call(reply)
            )
            items.append(
                {
                    "type": "function_call",
                    "id": self.server.new_id("fc"),
                    "call_id": self.server.new_id("call"),
                    "status": "completed",
                    **call,
                }
            )
        return items

    def usage(self) -> dict[str, Any]:
        input_tokens = max(1, len(json.dumps(self.request.body)) // 4)
        return {
            "input_tokens": input_tokens,
            "input_tokens_details": None,
            "output_tokens": 1,
            "output_tokens_details": None,
            "total_tokens": input_tokens + 1,
        }

    def response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "status": status,
            "model": str(self.request.body.get("model", "fake-model")),
            "output": output,
            "usage": self.usage() if status == "completed" else None,
        }

    def whole(self, reply: Text | Shell | CallTool) -> dict[str, Any]:
        return self.response("completed", self.items(reply))

    def send(self, stream: Stream, data: dict[str, Any]) -> None:
        stream.event({**data, "sequence_number": next(stream.sequence)})

    def start(self, stream: Stream) -> None:
        stream.start()
        self.send(
            stream,
            {"type": "response.created", "response": self.response("in_progress", [])},
        )

    def finish(self, stream: Stream, reply: Text | Shell | CallTool) -> None:
        items = self.items(reply)
        delay = reply.chunk_delay_s if isinstance(reply, Text) else 0.0
        for index, item in enumerate(items):
            if item["type"] == "message":
                self.send(
                    stream,
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "status": "in_progress", "content": []},
                    },
                )
                for number, piece in enumerate(chunks(item["content"][0]["text"])):
                    if number and delay:
                        time.sleep(delay)
                    self.send(
                        stream,
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": piece,
                        },
                    )
            self.send(
                stream, {"type": "response.output_item.done", "output_index": index, "item": item}
            )
        self.send(
            stream, {"type": "response.completed", "response": self.response("completed", items)}
        )

    def keepalive(self, stream: Stream) -> None:
        stream.comment()
