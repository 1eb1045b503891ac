"""The private CODEX_HOME of one clone: its `config.toml`, its login, the engine's environment.

Codex reads its settings from `$CODEX_HOME/config.toml` (docs/engines.md). The driver writes a
fresh one for every session, from the task alone: the model provider (from the variables the
login's secret provider gave, `OPENAI_API_KEY` and, behind a gateway or in the tests,
`OPENAI_BASE_URL`), no approvals and no sandbox (the container is the sandbox), and the
`shadowclone_ask` MCP server, required and with a tool timeout longer than the ask wait limit.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from shadowclone.plugin import EngineTask, contract

log = logging.getLogger(__name__)

ASK_SERVER = contract.ASK_SERVER
"""The MCP server name the engine sees: its tool is `ask` in the namespace
`mcp__shadowclone_ask`."""

API_KEY_VARIABLE = "OPENAI_API_KEY"
"""The API key login (secret provider `openai-api-key`) arrives in this variable."""
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
"""The Responses API base URL (ending in `/v1`), for a gateway or the fake model server."""
DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROVIDER = "shadowclone"
"""The id of the model provider the driver defines when the task names a key or a base URL."""
AUTH_FILE = "auth.json"
"""The ChatGPT plan login (secret provider `chatgpt-plan`), as `codex login` writes it."""

TOOL_TIMEOUT_MARGIN_S = 60.0
"""Added to the ask wait limit, so Codex never cuts the ask tool short itself."""
MCP_STARTUP_TIMEOUT_S = 60.0
"""Codex's default of 10 s is short for a Python MCP server on a busy machine; the server is
required, so a slow start would fail the whole session."""


def codex_home(task: EngineTask) -> Path:
    """The CODEX_HOME of this clone: its config, login, sessions and logs."""
    return task.state_dir / "codex"


def provider_table(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The `[model_providers.shadowclone]` table for the task's variables, or None when Codex's
    built-in OpenAI provider serves: no key and no base URL, so the login is a ChatGPT plan's
    `auth.json` in CODEX_HOME."""
    api_key = env.get(API_KEY_VARIABLE)
    base_url = env.get(BASE_URL_VARIABLE)
    if not api_key and not base_url:
        return None
    table: dict[str, Any] = {
        "name": "OpenAI (shadowclone)",
        "base_url": base_url or DEFAULT_BASE_URL,
        "wire_api": "responses",
    }
    if api_key:
        # Sent as `Authorization: Bearer`; no `codex login` needed.
        table["env_key"] = API_KEY_VARIABLE
    else:
        # A ChatGPT plan behind a gateway: the tokens of auth.json authenticate.
        table["requires_openai_auth"] = True
    return table


def config_data(task: EngineTask) -> dict[str, Any]:
    """What `config.toml` holds for `task`, as TOML-ready data."""
    data: dict[str, Any] = {
        # The container is the sandbox, and nobody is there to approve a command.
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
        # The login lives in CODEX_HOME/auth.json, never in a keyring the container lacks.
        "cli_auth_credentials_store": "file",
        "analytics": {"enabled": False},
        # Left alone, Codex trusts a git checkout it has full access to, and then loads the
        # repository's own `.codex/` layer: MCP servers and hooks that run the repository's
        # code as soon as the session opens. The clone's config is ours alone. The state
        # folder too: an early thread starts there, and keeps its trust when its first turn
        # moves it into the workspace.
        "projects": {
            str(path): {"trust_level": "untrusted"}
            for path in dict.fromkeys(
                (task.workspace, task.workspace.resolve(), task.state_dir, task.state_dir.resolve())
            )
        },
    }
    if task.model:
        data["model"] = task.model
    if not task.web_tools:
        data["web_search"] = "disabled"
    provider = provider_table(task.env)
    if provider is not None:
        data["model_provider"] = PROVIDER
        data["model_providers"] = {PROVIDER: provider}
    where: dict[str, Any] = {}
    if task.ask_url:
        where = {"url": task.ask_url, "http_headers": dict(task.ask_headers)}
    elif task.ask_command:
        command, *args = task.ask_command
        where = {"command": command, "args": args}
    if where:
        data["mcp_servers"] = {
            ASK_SERVER: {
                **where,
                # Without it the first model request can go out before the server is up, and
                # the model would not see the ask tool (docs/engines.md).
                "required": True,
                "startup_timeout_sec": MCP_STARTUP_TIMEOUT_S,
                "tool_timeout_sec": task.limits.ask_timeout_s + TOOL_TIMEOUT_MARGIN_S,
                "default_tools_approval_mode": "approve",
            }
        }
    return data


def config_document(task: EngineTask) -> str:
    """The text of `config.toml` for `task`."""
    return tomlkit.dumps(config_data(task))


def prepare_home(task: EngineTask) -> Path:
    """Create CODEX_HOME with a fresh `config.toml`, and move a ChatGPT plan login the run
    program left in the state folder into it; return the folder.

    The login is moved, not copied: its tokens rotate, and two copies would race on the refresh
    (docs/engines.md).
    """
    home = codex_home(task)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config_document(task))
    left = task.state_dir / AUTH_FILE
    if left.exists() and not (home / AUTH_FILE).exists():
        os.replace(left, home / AUTH_FILE)
        log.info("moved the ChatGPT login into %s", home)
    return home


def engine_env(task: EngineTask, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the `codex app-server` process: ours, the task's, and CODEX_HOME."""
    env = dict(os.environ if base is None else base)
    env.update(task.env)
    env["CODEX_HOME"] = str(codex_home(task))
    return env
