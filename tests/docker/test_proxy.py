"""The egress proxy on its own (no Docker): a real proxy process on a Unix socket forwards
CONNECT tunnels and absolute-form HTTP only to the allowed host:port, and refuses the rest."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from shadowclone.fakes.models import FakeModelServer
from shadowclone_docker_launch import proxy

WAIT_S = 30.0


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
    process = subprocess.Popen(
        [
            sys.executable,
            proxy.__file__,
            "--allow",
            f"127.0.0.1:{model.port}",
            "--socket",
            str(path),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
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


def post(target: str, host: str, body: bytes) -> bytes:
    return (
        f"POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Proxy-Connection: keep-alive\r\nContent-Length: {len(body)}\r\n\r\n"
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


def test_a_tunnel_to_the_model_is_opened(proxy_socket: Path, model: FakeModelServer) -> None:
    where = f"127.0.0.1:{model.port}"
    connect = f"CONNECT {where} HTTP/1.1\r\nHost: {where}\r\n\r\n".encode()
    inner = post("/v1/messages", where, message("tunnelled")).replace(
        b"Proxy-Connection: keep-alive", b"Connection: close"
    )
    reply = exchange(proxy_socket, connect + inner)
    assert reply.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    assert b"pong" in reply
    assert model.saw_text("tunnelled")


@pytest.mark.parametrize(
    "request_text",
    [
        "CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n",
        "CONNECT github.com:443 HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
        "GET http://127.0.0.1:{other}/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET https://127.0.0.1:{model}/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http://127.0.0.1.evil:{model}/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{model}\r\n\r\n",
    ],
)
def test_everything_else_is_refused(
    proxy_socket: Path, model: FakeModelServer, elsewhere: int, request_text: str
) -> None:
    reply = exchange(proxy_socket, request_text.format(other=elsewhere, model=model.port).encode())
    assert reply.startswith(b"HTTP/1.1 403 Forbidden"), reply[:200]
    assert model.requests == []


def test_a_malformed_request_is_refused(proxy_socket: Path) -> None:
    assert exchange(proxy_socket, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400")


def test_an_allowed_host_that_is_down_gives_502(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    path = tmp_path / "proxy.sock"
    process = subprocess.Popen(
        [sys.executable, proxy.__file__, "--allow", f"127.0.0.1:{port}", "--socket", str(path)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        assert proxy.READY_LINE in process.stderr.readline()
        reply = exchange(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 502 Bad Gateway")
    finally:
        process.terminate()
        process.wait(WAIT_S)


def test_allowed_hosts_are_parsed() -> None:
    assert proxy.parse_allowed("API.example.com") == ("api.example.com", (443, 80))
    assert proxy.parse_allowed("host.docker.internal:8080") == ("host.docker.internal", (8080,))
    with pytest.raises(ValueError, match="not host"):
        proxy.parse_allowed(":80")
