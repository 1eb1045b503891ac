"""The real Claude Code through the model proxy, holding only a placeholder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from shadowclone.proxy import (
    PLACEHOLDERS,
    ModelProxy,
    credential_for_login,
)
from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest, Text
from shadowclone_testing.harness import engines_bin, skip_or_fail

pytestmark = pytest.mark.anyio

REAL_KEY = "sk-ant-real-key-0123456789"


CLAUDE_LOGINS = {
    "claude-api-key": ("anthropic_api_key", "ANTHROPIC_API_KEY", {"x-api-key": REAL_KEY}),
    "claude-subscription": (
        "claude_code_oauth_token",
        "CLAUDE_CODE_OAUTH_TOKEN",
        {"authorization": f"Bearer {REAL_KEY}"},
    ),
}


@pytest.mark.engines
@pytest.mark.parametrize("login", CLAUDE_LOGINS)
async def test_claude_code_works_through_the_proxy_with_a_placeholder(
    login: str,
    server: FakeModelServer,
    tmp_path: Path,
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
    assert_clean: Callable[[ModelRequest, Mapping[str, str]], None],
) -> None:
    claude = engines_bin() / "claude"
    if not claude.exists():
        skip_or_fail(f"claude not installed in {engines_bin()}: run scripts/install-engines")
    key, variable, expected = CLAUDE_LOGINS[login]
    server.add(Text("Hello through the proxy."))
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "CLAUDE")) and name != "HOME"
    }
    env.update(
        {
            "HOME": str(tmp_path),
            "ANTHROPIC_BASE_URL": "",  # set below, once the proxy listens
            variable: PLACEHOLDERS[key],
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "IS_SANDBOX": "1",
        }
    )
    async with running(server.url, credential_for_login(login, {key: REAL_KEY})) as proxy:
        env["ANTHROPIC_BASE_URL"] = proxy.engine_base_url
        process = await asyncio.create_subprocess_exec(
            str(claude), "-p", "Say hello.", "--output-format", "text",
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(120):
            out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert "Hello through the proxy." in out.decode()
    assert server.model_requests()
    for request in server.requests:
        assert_clean(request, expected)
        if login == "claude-subscription":
            assert request.headers["anthropic-beta"].split(",").count("oauth-2025-04-20") == 1
