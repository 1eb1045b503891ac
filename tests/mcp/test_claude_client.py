"""The real Claude Code as the MCP client of `shadowclone mcp`: a scripted fake model
calls the `start` tool, and a clone is queued exactly as the CLI would queue it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from shadowclone.config import Paths
from shadowclone.node.runfolder import run_folders
from shadowclone_testing.fakes.models import CallTool, FakeModelServer, Reply, Text
from shadowclone_testing.harness import set_up


def test_claude_code_starts_a_clone_through_the_mcp_server(
    sc_home: Paths, sc_engines_on_path: Path, tmp_path: Path
) -> None:
    set_up(sc_home)
    server = {
        "mcpServers": {
            "shadowclone": {
                "type": "stdio",
                "command": sys.executable,
                "args": ["-P", "-c", "from shadowclone.cli import entry; entry()", "mcp"],
                "env": {"SHADOWCLONE_HOME": str(sc_home.config_file.parent)},
            }
        }
    }
    script: list[Reply] = [
        CallTool("shadowclone", "start", {"target": "acme/app#7", "instructions": "be brief"}),
        Text("The clone is queued."),
    ]
    with FakeModelServer(script) as models:
        done = subprocess.run(
            [
                str(sc_engines_on_path / "claude"),
                "-p",
                "Start a clone on acme/app#7.",
                "--output-format",
                "stream-json",
                "--verbose",
                "--mcp-config",
                json.dumps(server),
                "--strict-mcp-config",
                "--permission-mode",
                "bypassPermissions",
            ],
            cwd=tmp_path,
            env={
                **os.environ,
                "ANTHROPIC_BASE_URL": models.url,
                "ANTHROPIC_API_KEY": "sk-ant-test-key-0000000000",
                "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "IS_SANDBOX": "1",
                "ENABLE_TOOL_SEARCH": "false",
            },
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        results = [r for request in models.requests for r in request.tool_results()]
    assert done.returncode == 0, done.stderr[-2000:]
    [folder] = list(run_folders(sc_home.clones_dir))
    request = folder.request()
    assert (request.target.key, request.instructions) == ("acme/app#7", "be brief")
    assert any(folder.id in result for result in results), results
