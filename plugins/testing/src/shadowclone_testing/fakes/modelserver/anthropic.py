"""Rendering replies in the Anthropic Messages API."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shadowclone_testing.fakes.modelserver.replies import CallTool, Shell, Text
from shadowclone_testing.fakes.modelserver.requests import ModelRequest
from shadowclone_testing.fakes.modelserver.stream import Stream, chunks, mcp_name_part

if TYPE_CHECKING:
    from shadowclone_testing.fakes.modelserver.server import FakeModelServer


class AnthropicWriter:
    """Renders replies as Messages API responses (docs/engines.md)."""

    def __init__(self, server: FakeModelServer, request: ModelRequest) -> None:
        self.server = server
        self.request = request
        self.model = str(request.body.get("model", "fake-model"))
        self.message_id = server.new_id("msg")

    def blocks(self, reply: Text | Shell | CallTool) -> tuple[list[dict[str, Any]], str]:
        """The content blocks and stop reason of a reply."""
        if isinstance(reply, Text):
            return [{"type": "text", "text": reply.text}], "end_turn"
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        if isinstance(reply, Shell):
            name = "Bash"
            arguments: Mapping[str, Any] = {
                "command": reply.command,
                "description": reply.description or reply.command[:60],
            }
        else:
            name = f"mcp__{mcp_name_part(reply.server)}__{mcp_name_part(reply.tool)}"
            arguments = reply.arguments
        blocks.append(
            {
                "type": "tool_use",
                "id": self.server.new_id("toolu"),
                "name": name,
                "input": dict(arguments),
            }
        )
        return blocks, "tool_use"

    def usage(self) -> dict[str, int]:
        return {"input_tokens": max(1, len(json.dumps(self.request.body)) // 4), "output_tokens": 1}

    def whole(self, reply: Text | Shell | CallTool) -> dict[str, Any]:
        blocks, stop_reason = self.blocks(reply)
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self.usage(),
        }

    def start(self, stream: Stream) -> None:
        stream.start()
        message = self.whole(Text(""))
        message.update(content=[], stop_reason=None)
        stream.event({"type": "message_start", "message": message})

    def finish(self, stream: Stream, reply: Text | Shell | CallTool) -> None:
        blocks, stop_reason = self.blocks(reply)
        delay = reply.chunk_delay_s if isinstance(reply, Text) else 0.0
        output_tokens = 0
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                stream.event(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                for number, piece in enumerate(chunks(block["text"])):
                    if number and delay:
                        time.sleep(delay)
                    output_tokens += 1
                    stream.event(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        }
                    )
            else:
                stream.event(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    }
                )
                output_tokens += 1
                stream.event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    }
                )
            stream.event({"type": "content_block_stop", "index": index})
        stream.event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": max(1, output_tokens)},
            }
        )
        stream.event({"type": "message_stop"})

    def keepalive(self, stream: Stream) -> None:
        stream.event({"type": "ping"})
