"""A client of the `shadowclone mcp` server in a process of its own, as an MCP host runs it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent
from shadowclone.config import HOME_VARIABLE

MODULE = [sys.executable, "-P", "-m", "shadowclone.mcp"]
"""The server as `python -m shadowclone.mcp`; `-P` keeps the test's folder off the path."""


@contextlib.asynccontextmanager
async def connected(tmp_path: Path, argv: list[str] = MODULE) -> AsyncIterator[Client]:
    """A client of a fresh server process for the test's home; its stderr goes to a file."""
    params = StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        env={HOME_VARIABLE: os.environ[HOME_VARIABLE]},
        cwd=tmp_path,
    )
    with (tmp_path / "mcp-server.log").open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            yield client


def text_of(result: CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result, after checking its text is the same JSON."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    data: dict[str, Any] | None = result.structured_content
    assert data is not None
    assert json.loads(text_of(result)) == data
    return data
