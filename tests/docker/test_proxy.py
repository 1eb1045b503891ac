"""The egress proxy on its own (no Docker): a real proxy process on a Unix socket forwards
CONNECT tunnels and absolute-form HTTP only to the allowed host:port, and only for a client with
the clone's egress token; it refuses the rest."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from shadowclone_docker_launch import proxy
from shadowclone_testing.fakes.models import FakeModelServer

WAIT_S = 30.0
TOKEN = "egress-token-0123456789"
AUTH = "Proxy-Authorization: Basic {}\r\n".format(
    base64.b64encode(f"shadowclone:{TOKEN}".encode()).decode()
)


def start_proxy(allow: str, path: Path, token: str | None = TOKEN) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key != proxy.TOKEN_VARIABLE}
    if token is not None:
        env[proxy.TOKEN_VARIABLE] = token
    return subprocess.Popen(
        [sys.executable, proxy.__file__, "--allow", allow, "--socket", str(path)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer([], final_text="pong") as server:
        yield server


@pytest.fixture
def elsewhere() -> Iterator[int]:
    """A port on loopback that listens, and must never be reached through the proxy."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield int(server.getsockname()[1])


@pytest.fixture
def proxy_socket(tmp_path: Path, model: FakeModelServer) -> Iterator[Path]:
    path = tmp_path / "proxy.sock"
    process = start_proxy(f"127.0.0.1:{model.port}", path)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # "" if it died: then the check below fails
        assert proxy.READY_LINE in line, line
        assert path.stat().st_mode & 0o777 == 0o666, "any clone user may connect"
        yield path
    finally:
        process.terminate()
        process.wait(WAIT_S)


def exchange(path: Path, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(WAIT_S)
        conn.connect(str(path))
        conn.sendall(data)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
        return received


def message(text: str) -> bytes:
    return json.dumps(
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
    ).encode()


def post(target: str, host: str, body: bytes, auth: str = AUTH) -> bytes:
    return (
        f"POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Proxy-Connection: keep-alive\r\n{auth}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_plain_http_to_the_model_is_forwarded(proxy_socket: Path, model: FakeModelServer) -> None:
    where = f"127.0.0.1:{model.port}"
    reply = exchange(
        proxy_socket, post(f"http://{where}/v1/messages?beta=true", where, message("hi"))
    )
    assert reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert b"pong" in reply
    seen = model.wait_for_text("hi")
    assert seen.path.startswith("/v1/messages")
    assert "proxy-authorization" not in seen.headers, "the token goes no further"


def test_a_tunnel_to_the_model_is_opened(proxy_socket: Path, model: FakeModelServer) -> None:
    where = f"127.0.0.1:{model.port}"
    connect = f"CONNECT {where} HTTP/1.1\r\nHost: {where}\r\n{AUTH}\r\n".encode()
    inner = post("/v1/messages", where, message("tunnelled"), auth="").replace(
        b"Proxy-Connection: keep-alive", b"Connection: close"
    )
    reply = exchange(proxy_socket, connect + inner)
    assert reply.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    assert b"pong" in reply
    assert model.saw_text("tunnelled")


@pytest.mark.parametrize(
    "request_text",
    [
        "CONNECT 127.0.0.1:{other} HTTP/1.1\r\n{auth}\r\n",
        "CONNECT github.com:443 HTTP/1.1\r\n{auth}\r\n",
        "CONNECT 127.0.0.1 HTTP/1.1\r\n{auth}\r\n",
        "GET http://127.0.0.1:{other}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
        "GET https://127.0.0.1:{model}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
        "GET http://127.0.0.1.evil:{model}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
        "GET /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{model}\r\n{auth}\r\n",
    ],
)
def test_everything_else_is_refused(
    proxy_socket: Path, model: FakeModelServer, elsewhere: int, request_text: str
) -> None:
    text = request_text.format(other=elsewhere, model=model.port, auth=AUTH)
    reply = exchange(proxy_socket, text.encode())
    assert reply.startswith(b"HTTP/1.1 403 Forbidden"), reply[:200]
    assert model.requests == []


def basic(credentials: str) -> str:
    return f"Proxy-Authorization: Basic {base64.b64encode(credentials.encode()).decode()}\r\n"


@pytest.mark.parametrize(
    "auth",
    [
        "",
        basic("shadowclone:not-the-token"),
        basic(f"shadowclone:{TOKEN}x"),
        basic("shadowclone:"),
        basic(TOKEN),
        f"Proxy-Authorization: Bearer {TOKEN}\r\n",
        "Proxy-Authorization: Basic !!!not-base64\r\n",
        f"Authorization: Basic {base64.b64encode(f'shadowclone:{TOKEN}'.encode()).decode()}\r\n",
    ],
)
@pytest.mark.parametrize("kind", ["connect", "plain"])
def test_without_the_egress_token_nothing_goes_through(
    proxy_socket: Path, model: FakeModelServer, auth: str, kind: str
) -> None:
    """What the engine has: the relay's address, but not the run program's token."""
    where = f"127.0.0.1:{model.port}"
    if kind == "connect":
        request = f"CONNECT {where} HTTP/1.1\r\nHost: {where}\r\n{auth}\r\n".encode()
    else:
        request = post(f"http://{where}/v1/messages", where, message("sneaky"), auth=auth)
    reply = exchange(proxy_socket, request)
    assert reply.startswith(b"HTTP/1.1 407 Proxy Authentication Required"), reply[:200]
    assert b'Proxy-Authenticate: Basic realm="shadowclone"' in reply
    assert model.requests == []


def test_a_proxy_without_a_token_does_not_start(tmp_path: Path) -> None:
    process = start_proxy("127.0.0.1:1", tmp_path / "proxy.sock", token=None)
    _, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 2
    assert proxy.TOKEN_VARIABLE in err and "Traceback" not in err


def test_a_malformed_request_is_refused(proxy_socket: Path) -> None:
    assert exchange(proxy_socket, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400")


def test_an_allowed_host_that_is_down_gives_502(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    path = tmp_path / "proxy.sock"
    process = start_proxy(f"127.0.0.1:{port}", path)
    try:
        assert process.stderr is not None
        assert proxy.READY_LINE in process.stderr.readline()
        reply = exchange(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n{AUTH}\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 502 Bad Gateway")
    finally:
        process.terminate()
        process.wait(WAIT_S)


def test_allowed_hosts_are_parsed() -> None:
    assert proxy.parse_allowed("API.example.com") == ("api.example.com", (443, 80))
    assert proxy.parse_allowed("host.docker.internal:8080") == ("host.docker.internal", (8080,))
    with pytest.raises(ValueError, match="not host"):
        proxy.parse_allowed(":80")
