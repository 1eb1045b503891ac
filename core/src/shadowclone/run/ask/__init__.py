"""The `shadowclone_ask` MCP server, through which the engine asks the owner a question.

This module only builds the command that starts the server; the server itself (`server.py`)
imports the MCP SDK, so it is loaded only in the server's own process.

The server is configured by environment variables. The command sets them itself (through
`env`), so it works unchanged wherever an engine starts MCP servers, including engines that
pass MCP servers only a few variables of their own environment (Codex, the MCP SDK's stdio
client).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from shadowclone.plugin import contract

SERVER_NAME = contract.ASK_SERVER
TOOL_NAME = contract.ASK_TOOL

RUN_FOLDER_VARIABLE = contract.RUN_FOLDER_VARIABLE
"""The run folder: progress lines are appended there, answers read from its deliveries."""
TIMEOUT_VARIABLE = "SHADOWCLONE_ASK_TIMEOUT_S"
"""Seconds to wait for the owner before the recommended option is taken."""
OUTBOX_VARIABLE = "SHADOWCLONE_ASK_OUTBOX"
"""Optional: where the server writes its question and answer lines instead of the run folder's
progress. The server runs as the engine's user, who may not write the run folder: the run
program relays the lines (`progress.AskRelay`)."""

DEFAULT_TIMEOUT_S = 30 * 60.0

ENV_PROGRAM = "/usr/bin/env"


def ask_server_env(
    run_folder: Path, timeout_s: float = DEFAULT_TIMEOUT_S, outbox: Path | None = None
) -> dict[str, str]:
    """The variables that configure the server for one run folder."""
    env = {RUN_FOLDER_VARIABLE: str(run_folder), TIMEOUT_VARIABLE: f"{timeout_s:g}"}
    if outbox is not None:
        env[OUTBOX_VARIABLE] = str(outbox)
    return env


def ask_command(
    run_folder: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    outbox: Path | None = None,
    python: str = sys.executable,
) -> tuple[str, ...]:
    """argv that starts the server over stdio for one run folder: `EngineTask.ask_command`."""
    return with_env(
        ask_server_env(run_folder, timeout_s, outbox),
        # -P: the engine starts the server in the workspace, whose folders must not shadow
        # our modules (a repository's own `mcp/` would be imported, and its code run).
        (python, "-P", "-m", "shadowclone.run.ask"),
    )


def with_env(env: Mapping[str, str], argv: tuple[str, ...]) -> tuple[str, ...]:
    return (ENV_PROGRAM, *(f"{key}={value}" for key, value in env.items()), *argv)
