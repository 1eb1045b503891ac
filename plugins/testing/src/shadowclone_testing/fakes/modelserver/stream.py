"""What both APIs' renderings share: the SSE stream, word-sized chunks, MCP tool names."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any


def chunks(text: str) -> list[str]:
    """Word-sized pieces of `text` that join back to it exactly."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [""]


def mcp_name_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


class Stream:
    """Writes one SSE response; stops quietly when the client hangs up."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._handler = handler
        self.sequence = itertools.count()

    def start(self) -> None:
        self._handler.send_response(HTTPStatus.OK)
        self._handler.send_header("Content-Type", "text/event-stream")
        self._handler.send_header("Cache-Control", "no-cache")
        self._handler.send_header("Connection", "close")
        self._handler.end_headers()
        self._handler.close_connection = True

    def event(self, data: Mapping[str, Any]) -> None:
        frame = f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"
        self._handler.wfile.write(frame.encode())
        self._handler.wfile.flush()

    def comment(self) -> None:
        self._handler.wfile.write(b": keepalive\n\n")
        self._handler.wfile.flush()


class ToolNotOffered(Exception):
    """The request offers no tool the scripted reply could call."""
