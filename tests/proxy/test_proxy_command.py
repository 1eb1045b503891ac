"""`python -m shadowclone.proxy`: serving on a socket until SIGTERM, and bad input in one line."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest
from shadowclone.proxy import PLACEHOLDERS
from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest

pytestmark = pytest.mark.anyio


def write_secrets(folder: Path, **values: str) -> Path:
    path = folder / "secrets.toml"
    path.write_text("".join(f'{key} = "{value}"\n' for key, value in values.items()))
    return path


def proxy_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "shadowclone.proxy", *map(str, args)]


def test_the_command_serves_on_a_socket_until_sigterm(
    server: FakeModelServer,
    tmp_path: Path,
    assert_clean: Callable[[ModelRequest, Mapping[str, str]], None],
) -> None:
    secrets = write_secrets(tmp_path, openai_api_key="sk-openai-real")
    socket = tmp_path / "proxy.sock"
    command = proxy_command(
        "--upstream", server.openai_url, "--login", "openai-api-key", "--secrets", secrets,
        "--socket", socket,
    )  # fmt: skip
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        try:
            ready = process.stderr.readline()
            assert ready.startswith(f"model proxy listening on unix:{socket}, forwarding to ")
            transport = httpx2.HTTPTransport(uds=str(socket))
            with httpx2.Client(transport=transport) as client:
                placeholder = {"authorization": f"Bearer {PLACEHOLDERS['openai_api_key']}"}
                response = client.get("http://localhost/v1/models", headers=placeholder)
            assert response.status_code == 200
            # The proxy logs an exchange once it has ended, which may be after the client has
            # its answer: wait for that line before stopping it.
            log = process.stderr.readline()
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
            log += process.stderr.read()
        finally:
            process.kill()
    assert_clean(server.requests[0], {"authorization": "Bearer sk-openai-real"})
    assert "GET '/v1/models' -> 200" in log
    assert "sk-openai-real" not in ready + log
    assert not socket.exists()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no secrets file", "no secrets file"),
        ("unknown login", "cannot serve the login"),
        ("missing value", "no value for anthropic_api_key"),
        ("bad upstream", "bad upstream URL"),
        ("no place to listen", "one of the arguments --socket --port is required"),
        ("both places", "not allowed with argument"),
        ("bad port", "is not a TCP port"),
        ("port in use", "cannot listen on"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(case: str, expected: str, tmp_path: Path) -> None:
    secrets = write_secrets(tmp_path, anthropic_api_key="sk-ant-real")
    args: dict[str, Any] = {
        "--upstream": "https://api.anthropic.com",
        "--login": "claude-api-key",
        "--secrets": secrets,
        "--port": "0",
    }
    with contextlib.ExitStack() as stack:
        if case == "no secrets file":
            args["--secrets"] = tmp_path / "missing.toml"
        elif case == "unknown login":
            args["--login"] = "gemini"
        elif case == "missing value":
            args["--secrets"] = write_secrets(tmp_path, openai_api_key="x")
        elif case == "bad upstream":
            args["--upstream"] = "ftp://example.com"
        elif case == "no place to listen":
            del args["--port"]
        elif case == "both places":
            args["--socket"] = tmp_path / "s"
        elif case == "bad port":
            args["--port"] = "70000"
        elif case == "port in use":
            import socket

            taken = stack.enter_context(socket.socket())
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            args["--port"] = str(taken.getsockname()[1])
        flat = [str(item) for pair in args.items() for item in pair]
        command = proxy_command(*flat)
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert "sk-ant-real" not in done.stderr


# --------------------------------------------------------------------------- Claude Code
