"""What the model proxy refuses (other hosts, odd paths and methods, hostile requests), an
unreachable provider, the outbound proxy, bad setups, and a Unix socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import httpx2
import pytest
from shadowclone.proxy import (
    ModelProxy,
    ProxyError,
    StaticCredential,
)
from shadowclone.proxy.backoff import TRIES, Backoff
from shadowclone.proxy.rules import refusal
from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest

pytestmark = pytest.mark.anyio

REAL_KEY = "sk-ant-real-key-0123456789"
MESSAGE = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


async def test_paths_outside_the_base_path_are_refused(
    server: FakeModelServer,
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
    raw: Callable[[ModelProxy, bytes], Awaitable[bytes]],
    status_of: Callable[[bytes], int],
) -> None:
    async with running(server.openai_url) as proxy, httpx2.AsyncClient() as client:
        assert proxy.engine_base_url.endswith("/v1")
        ok = await client.get(proxy.engine_base_url + "/models")
        assert ok.status_code == 200
        for target in (b"/v2/models", b"/v1x", b"/", b"/v1/../x", b"/v1/%2e%2e/x", b"/v1%2f..%2fx"):
            response = await raw(proxy, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
            assert status_of(response) == 403, target
            assert response.count(b"\n", response.index(b"\r\n\r\n") + 4) == 1  # one line
    assert [request.path for request in server.requests] == ["/v1/models"]


def test_refusal_rules() -> None:
    assert refusal("POST", b"/v1/responses?x=1", "/v1") is None
    assert refusal("GET", b"/v1", "/v1") is None
    assert refusal("GET", b"/anything", "") is None
    assert refusal("CONNECT", b"evil:443", "")[0] == 405  # type: ignore[index]
    assert refusal("TRACE", b"/v1", "/v1")[0] == 405  # type: ignore[index]
    for target in (b"http://evil/v1", b"//evil/v1", b"*", b"/v1/a\\..\\b", b"/v1/%5c", b"/v1#x"):
        assert refusal("GET", target, "") is not None, target
    assert refusal("GET", b"/v1/caf\xc3\xa9", "")[0] == 400  # type: ignore[index]


HOSTILE_REQUESTS = {
    "absolute-form to another host": b"GET http://127.0.0.1:{other}/v1/models HTTP/1.1\r\n"
    b"Host: 127.0.0.1:{other}\r\n\r\n",
    "CONNECT to another host": b"CONNECT 127.0.0.1:{other} HTTP/1.1\r\n"
    b"Host: 127.0.0.1:{other}\r\n\r\n",
    "TRACE": b"TRACE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad request line": b"GARBAGE\r\n\r\n",
    "CR in the path": b"GET /v1/models\rX-Evil: 1 HTTP/1.1\r\nHost: x\r\n\r\n",
    "space in the path": b"GET /v1/models X HTTP/1.1\r\nHost: x\r\n\r\n",
    "huge headers": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n",
    "many headers": b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 20_000 + b"\r\n",
    "bad header": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
    "no host": b"GET /v1/models HTTP/1.1\r\n\r\n",
    "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "non-ASCII path": b"GET /v1/caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n",
    "content-length and chunked": b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "bad chunk": b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    "upgrade": b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
    b"Upgrade: websocket\r\nConnection: Upgrade, close\r\n\r\n",
}


@pytest.mark.parametrize("name", HOSTILE_REQUESTS)
async def test_hostile_requests_never_reach_another_host_nor_crash_the_proxy(
    name: str,
    server: FakeModelServer,
    other: FakeModelServer,
    proxy: ModelProxy,
    raw: Callable[[ModelProxy, bytes], Awaitable[bytes]],
    status_of: Callable[[bytes], int],
) -> None:
    data = HOSTILE_REQUESTS[name].replace(b"{other}", str(other.port).encode())
    response = await raw(proxy, data)
    if response:
        assert status_of(response) in {200, 400, 403, 405, 413, 431, 404}, response[:200]
    assert other.requests == []
    for request in server.requests:  # whatever got through went to the upstream, cleanly
        assert "x-evil" not in request.headers
        assert request.headers["host"] == f"127.0.0.1:{server.port}"
    # Still serving.
    async with httpx2.AsyncClient() as client:
        assert (await client.get(proxy.engine_base_url + "/v1/models")).status_code == 200


async def test_header_injection_through_the_path_is_refused(
    server: FakeModelServer,
    other: FakeModelServer,
    proxy: ModelProxy,
    raw: Callable[[ModelProxy, bytes], Awaitable[bytes]],
    status_of: Callable[[bytes], int],
) -> None:
    target = b"/v1/models%0d%0aX-Evil:%201%0d%0aHost:%20127.0.0.1:" + str(other.port).encode()
    response = await raw(proxy, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
    assert status_of(response) == 403
    assert server.requests == other.requests == []


async def test_an_unreachable_provider_is_a_502_in_one_line(
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
) -> None:
    """After the tries of the backoff (quick ones here), each told as an overload."""
    with FakeModelServer() as gone:
        url = gone.url
    told: list[int] = []
    async with running(url) as proxy, httpx2.AsyncClient() as client:
        proxy.backoff = lambda: Backoff(base_s=0.01, cap_s=0.05)
        proxy.on_overload = told.append
        response = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
    assert told == [0] * (TRIES - 1)
    assert response.status_code == 502
    assert response.text.startswith("bad gateway: ")
    assert response.text.count("\n") == 1


async def test_the_outbound_proxy_carries_the_upstream_requests(server: FakeModelServer) -> None:
    seen: list[bytes] = []

    async def outbound(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nvia")
        await writer.drain()
        writer.close()

    fake = await asyncio.start_server(outbound, "127.0.0.1", 0)
    port = fake.sockets[0].getsockname()[1]
    credential = StaticCredential({"x-api-key": REAL_KEY})
    async with ModelProxy(
        server.url, credential, outbound_proxy=f"http://127.0.0.1:{port}"
    ) as proxy:
        await proxy.start_tcp()
        async with httpx2.AsyncClient() as client:
            response = await client.get(proxy.engine_base_url + "/v1/models")
    fake.close()
    assert response.text == "via"
    (head,) = seen
    assert head.startswith(f"GET http://127.0.0.1:{server.port}/v1/models HTTP/1.1".encode())
    assert f"x-api-key: {REAL_KEY}".encode() in head
    assert server.requests == []


def test_bad_setups_are_one_line_errors() -> None:
    credential = StaticCredential({"x-api-key": "k"})
    for url in ("ftp://host/", "not a url", "https://host/v1?x=1", "https://user:pw@host/"):
        with pytest.raises(ProxyError, match="bad upstream URL"):
            ModelProxy(url, credential)
    for outbound in ("ftp://proxy:3128", "not a url"):
        with pytest.raises(ProxyError, match="bad outbound proxy URL"):
            ModelProxy("https://api.anthropic.com", credential, outbound_proxy=outbound)


async def test_a_client_that_cannot_be_made_fails_requests_and_not_the_close(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream client is made in a thread once the proxy listens: if that fails, each
    request fails and the proxy still closes cleanly."""

    def broken(_proxy: ModelProxy) -> httpx2.AsyncClient:
        raise RuntimeError("no client today")

    monkeypatch.setattr(ModelProxy, "_new_client", broken)
    async with ModelProxy(server.openai_url, StaticCredential({"x-api-key": REAL_KEY})) as proxy:
        await proxy.start_tcp()
        async with httpx2.AsyncClient() as client:
            with pytest.raises(httpx2.HTTPError):
                await client.get(proxy.engine_base_url + "/models")
    assert server.requests == []


async def test_a_unix_socket(
    server: FakeModelServer,
    tmp_path: Path,
    assert_clean: Callable[[ModelRequest, Mapping[str, str]], None],
) -> None:
    socket = tmp_path / "proxy.sock"
    async with ModelProxy(server.openai_url, StaticCredential({"x-api-key": REAL_KEY})) as proxy:
        await proxy.start_unix(socket)
        assert proxy.engine_base_url == "http://localhost/v1"
        transport = httpx2.AsyncHTTPTransport(uds=str(socket))
        async with httpx2.AsyncClient(transport=transport) as client:
            assert (await client.get(proxy.engine_base_url + "/models")).status_code == 200
    assert not socket.exists()
    assert_clean(server.requests[0], {"x-api-key": REAL_KEY})
