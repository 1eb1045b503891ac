"""A repository's own engine settings that would run commands: what a stranger's pull request
could add to make its code run as soon as an engine starts in the checkout.

Each function returns the files (path in the repository -> text) for one engine; every command
in them only leaves a file named for where it came from in `markers`, so a test asserts that
folder stays empty (or, for a positive control, that a file appears). The same files serve a
workspace on disk (`plant`) and a pull request on the fake GitHub (its `files`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path

CLAUDE_HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop")


def _touch(markers: Path, name: str) -> str:
    return f"touch {shlex.quote(str(markers / name))}"


def claude_files(markers: Path) -> dict[str, str]:
    """Claude Code's project settings with a hook on each of `CLAUDE_HOOK_EVENTS` (markers
    `claude-hook-<event>`), its local settings with one more (`claude-local-hook`), and a
    `.mcp.json` stdio server (`claude-mcp`)."""
    hooks = {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": _touch(markers, name)}]}]
        for event, name in ((event, f"claude-hook-{event}") for event in CLAUDE_HOOK_EVENTS)
    }
    local = {
        "SessionStart": [
            {"hooks": [{"type": "command", "command": _touch(markers, "claude-local-hook")}]}
        ]
    }
    server = {"type": "stdio", "command": "/bin/sh", "args": ["-c", _touch(markers, "claude-mcp")]}
    return {
        ".claude/settings.json": json.dumps({"hooks": hooks}, indent=1),
        ".claude/settings.local.json": json.dumps({"hooks": local}, indent=1),
        ".mcp.json": json.dumps({"mcpServers": {"from_the_repository": server}}, indent=1),
    }


def codex_files(markers: Path) -> dict[str, str]:
    """Codex's project layer: `.codex/config.toml` with `notify` (`codex-notify`), an MCP
    server (`codex-mcp`) and hooks (`codex-hook-*`), and the same hooks in `.codex/hooks.json`
    (`codex-json-hook-*`)."""
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop")
    argv = ["/bin/sh", "-c"]
    config = [
        f"notify = {json.dumps([*argv, _touch(markers, 'codex-notify')])}",
        "",
        "[mcp_servers.from_the_repository]",
        'command = "/bin/sh"',
        f"args = {json.dumps(['-c', _touch(markers, 'codex-mcp')])}",
    ]
    for event in events:
        config += [
            "",
            f"[[hooks.{event}]]",
            f"[[hooks.{event}.hooks]]",
            'type = "command"',
            f"command = {json.dumps(_touch(markers, f'codex-hook-{event}'))}",
        ]
    hooks = {
        event: [
            {"hooks": [{"type": "command", "command": _touch(markers, f"codex-json-hook-{event}")}]}
        ]
        for event in events
    }
    return {
        ".codex/config.toml": "\n".join(config) + "\n",
        ".codex/hooks.json": json.dumps({"hooks": hooks}, indent=1),
    }


def all_files(markers: Path) -> dict[str, str]:
    """Both engines' files: a pull request that tries each engine at once."""
    return {**claude_files(markers), **codex_files(markers)}


def plant(workspace: Path, files: Mapping[str, str]) -> None:
    """Write `files` into `workspace`."""
    for name, text in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def markers_left(markers: Path) -> list[str]:
    """The names of the marker files the commands left, sorted."""
    return sorted(path.name for path in markers.iterdir()) if markers.exists() else []
