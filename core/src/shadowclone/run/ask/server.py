"""The `shadowclone_ask` MCP server over stdio, on the MCP SDK: what an engine starts itself
(`EngineTask.ask_command`) when the run program's own server (`http.py`) is not there. The tool
is `tool.AskTool`'s.

stdout is the MCP channel: everything else goes to stderr through `logging`.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from shadowclone.node.runfolder import RunFolder
from shadowclone.redact import Redactor
from shadowclone.run.ask import (
    DEFAULT_TIMEOUT_S,
    OUTBOX_VARIABLE,
    RUN_FOLDER_VARIABLE,
    SERVER_NAME,
    TIMEOUT_VARIABLE,
    TOOL_NAME,
)
from shadowclone.run.ask.tool import (
    INSTRUCTIONS,
    OPTIONS_HELP,
    QUESTION_HELP,
    RECOMMENDED_HELP,
    TITLE,
    AskTool,
    Refused,
    description,
)
from shadowclone.run.inbox import POLL_S
from shadowclone.run.progress import Redact

log = logging.getLogger(__name__)


def build_server(
    folder: RunFolder,
    redact: Redact,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = POLL_S,
    outbox: Path | None = None,
) -> MCPServer:
    """The server for one run folder, ready for `run()` or an in-memory client; its lines go
    to `outbox` when given, else to the run folder's progress."""
    tool = AskTool(folder, redact, timeout_s, poll_s, outbox)
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    async def ask(
        question: Annotated[str, Field(description=QUESTION_HELP)],
        options: Annotated[list[str], Field(description=OPTIONS_HELP)],
        recommended: Annotated[str, Field(description=RECOMMENDED_HELP)],
    ) -> str:
        try:
            return await tool.ask(question, options, recommended)
        except Refused as refused:
            raise ToolError(str(refused)) from None

    server.add_tool(
        ask,
        name=TOOL_NAME,
        title=TITLE,
        description=description(timeout_s),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        structured_output=False,
    )
    return server


def _settings() -> tuple[RunFolder, float, Path | None]:
    """Read the configuration variables, or raise `ValueError` naming the bad one."""
    folder_text = os.environ.get(RUN_FOLDER_VARIABLE, "")
    if not folder_text:
        raise ValueError(f"{RUN_FOLDER_VARIABLE} is not set")
    folder = RunFolder(Path(folder_text))
    if not folder.path.is_dir():
        raise ValueError(f"{RUN_FOLDER_VARIABLE}={folder_text} is not a folder")
    timeout_text = os.environ.get(TIMEOUT_VARIABLE, "")
    try:
        timeout_s = float(timeout_text) if timeout_text else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"{TIMEOUT_VARIABLE}={timeout_text} is not a number") from None
    if not timeout_s > 0:
        raise ValueError(f"{TIMEOUT_VARIABLE}={timeout_text} must be more than 0")
    outbox_text = os.environ.get(OUTBOX_VARIABLE, "")
    return folder, timeout_s, Path(outbox_text) if outbox_text else None


def main() -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"{SERVER_NAME}: %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # a line per file change
    try:
        folder, timeout_s, outbox = _settings()
    except ValueError as error:
        log.error("cannot start: %s", error)
        return 2
    # The server runs as the engine, which holds no secret: it masks tokens of known shapes,
    # and the run program masks every secret's value in the lines it relays.
    build_server(folder, Redactor(()), timeout_s, outbox=outbox).run("stdio")
    return 0
