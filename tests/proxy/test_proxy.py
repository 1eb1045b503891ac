"""The model proxy against the real fake model server: the credential it injects, what it strips,
how it streams, what it refuses, its command line, and the real Claude Code through it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.proxy import (
    ENGINE_AUTH_HEADERS,
    PLACEHOLDERS,
    Credential,
    LoginError,
    ModelProxy,
    ProxyError,
    StaticCredential,
    credential_for_login,
)
from shadowclone.proxy.backoff import TRIES, Backoff
from shadowclone.proxy.rules import HOP_BY_HOP, REQUEST_DROPPED, refusal, upstream_headers
from shadowclone_testing.fakes.models import ApiError, FakeModelServer, Hang, ModelRequest, Text
from shadowclone_testing.harness import engines_bin, skip_or_fail

pytestmark = pytest.mark.anyio

REAL_KEY = "sk-ant-real-key-0123456789"
PLACEHOLDER = PLACEHOLDERS["anthropic_api_key"]
MESSAGE = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
HOSTILE_HEADERS = {
    "x-api-key": PLACEHOLDER,
    "Authorization": f"Bearer {PLACEHOLDER}",
    "Proxy-Authorization": "Basic ZXZpbDpldmls",
    "ChatGPT-Account-Id": "acct-from-the-engine",
    "Cookie": "session=from-the-engine",
}


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def other() -> Iterator[FakeModelServer]:
    """A second server the engine would like to reach instead: it must see nothing."""
    with FakeModelServer() as other:
        yield other


@contextlib.asynccontextmanager
async def running(upstream: str, credential: Credential | None = None) -> AsyncIterator[ModelProxy]:
    credential = credential or StaticCredential({"x-api-key": REAL_KEY})
    async with ModelProxy(upstream, credential) as proxy:
        await proxy.start_tcp()
        yield proxy


@pytest.fixture
async def proxy(server: FakeModelServer) -> AsyncIterator[ModelProxy]:
    async with running(server.url) as proxy:
        yield proxy


def assert_clean(request: ModelRequest, headers: Mapping[str, str]) -> None:
    """The upstream request carries exactly the credential, and nothing of the engine's auth."""
    for name, value in request.headers.items():
        assert "shadowclone-placeholder" not in value, name
    for name in ENGINE_AUTH_HEADERS - set(headers):
        assert name not in request.headers, name
    for name, value in headers.items():
        assert request.headers[name] == value


def endpoint(proxy: ModelProxy) -> tuple[str, int]:
    url = urlsplit(proxy.engine_base_url)
    assert url.hostname and url.port
    return url.hostname, url.port


async def raw(proxy: ModelProxy, data: bytes) -> bytes:
    """Send bytes to the proxy as they are and read its answer until it closes."""
    reader, writer = await asyncio.open_connection(*endpoint(proxy))
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.read(-1)
    finally:
        writer.close()


def status_of(response: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    assert match, response[:200]
    return int(match.group(1))


# --------------------------------------------------------------------------- the credential


async def test_the_upstream_sees_the_real_credential_on_every_request(
    server: FakeModelServer, proxy: ModelProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="shadowclone.proxy")
    server.add(Text("One."), Text("Two, streamed.", chunk_delay_s=0.01))
    async with httpx2.AsyncClient(
        base_url=proxy.engine_base_url, headers=HOSTILE_HEADERS
    ) as client:
        # One keep-alive connection, several kinds of request.
        assert (await client.get("/v1/models")).status_code == 200
        assert (await client.post("/v1/messages", json=MESSAGE)).json()["content"][0][
            "text"
        ] == "One."
        streamed = await client.post("/v1/messages", json={**MESSAGE, "stream": True})
        assert "Two," in streamed.text
        counted = await client.post("/v1/messages/count_tokens?beta=true", json=MESSAGE)
        assert counted.status_code == 200

    assert len(server.requests) == 4
    for request in server.requests:
        assert_clean(request, {"x-api-key": REAL_KEY})
        assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert server.requests[1].body == MESSAGE
    assert server.requests[3].query == {"beta": "true"}
    # One line per request; no header value, no body, no query.
    async with asyncio.timeout(10):  # the line is written once the exchange is wound up
        while caplog.text.count(" -> 200") < 4:
            await asyncio.sleep(0.01)
    for secret in (REAL_KEY, PLACEHOLDER, "session=from-the-engine", "beta=true", '"hi"'):
        assert secret not in caplog.text


async def test_a_subscription_token_is_a_bearer_with_the_oauth_beta_added(
    server: FakeModelServer,
) -> None:
    credential = credential_for_login("claude-subscription", {"claude_code_oauth_token": "oat"})
    async with running(server.url, credential) as proxy, httpx2.AsyncClient() as client:
        url = proxy.engine_base_url + "/v1/messages"
        await client.post(url, json=MESSAGE, headers={"anthropic-beta": "claude-code-20250219"})
        await client.post(url, json=MESSAGE, headers={"anthropic-beta": "oauth-2025-04-20, x-1"})
        await client.post(url, json=MESSAGE, headers={"authorization": "Bearer placeholder"})

    first, second, third = server.requests
    for request in server.requests:
        assert_clean(request, {"authorization": "Bearer oat"})
    assert first.headers["anthropic-beta"] == "claude-code-20250219,oauth-2025-04-20"
    assert second.headers["anthropic-beta"] == "oauth-2025-04-20,x-1"
    assert third.headers["anthropic-beta"] == "oauth-2025-04-20"


def test_the_logins_and_their_headers() -> None:
    async def headers_of(login: str, values: Mapping[str, str]) -> Mapping[str, str]:
        return await credential_for_login(login, values).headers()

    assert asyncio.run(headers_of("claude-api-key", {"anthropic_api_key": "k"})) == {
        "x-api-key": "k"
    }
    assert asyncio.run(headers_of("openai-api-key", {"openai_api_key": " k\n"})) == {
        "authorization": "Bearer k"
    }
    with pytest.raises(LoginError, match="no value for openai_api_key"):
        credential_for_login("openai-api-key", {"anthropic_api_key": "k"})
    with pytest.raises(LoginError, match="placeholder"):
        credential_for_login("claude-api-key", {"anthropic_api_key": PLACEHOLDER})
    with pytest.raises(LoginError, match="cannot serve the login 'gemini'"):
        credential_for_login("gemini", {"codex_auth_json": "{}"})
    with pytest.raises(LoginError, match="codex_auth_json .* has no tokens"):
        credential_for_login("chatgpt-plan", {"codex_auth_json": "{}"})
    secret = credential_for_login("claude-api-key", {"anthropic_api_key": "sk-secret-42"})
    assert "sk-secret-42" not in repr(secret)
    assert all(value.startswith("shadowclone-placeholder-") for value in PLACEHOLDERS.values())


class Renewing:
    """A credential that renews itself once when the provider says 401."""

    problem: str | None = None

    def __init__(self) -> None:
        self.token = "old"
        self.failed: list[Mapping[str, str]] = []

    async def headers(self) -> Mapping[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    async def refreshed(self, failed: Mapping[str, str]) -> bool:
        self.failed.append(failed)
        self.token = "new"
        return len(self.failed) == 1


async def test_a_401_is_retried_once_after_the_credential_renews(server: FakeModelServer) -> None:
    credential = Renewing()
    server.add(ApiError("expired", status=401), Text("Fresh."))
    async with running(server.url, credential) as proxy, httpx2.AsyncClient() as client:
        response = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
        assert response.json()["content"][0]["text"] == "Fresh."
        # Renewing again gives up: the 401 reaches the engine.
        server.add(ApiError("expired", status=401), ApiError("still", status=401))
        again = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
        assert again.status_code == 401

    old, new, *_ = server.requests
    assert old.headers["authorization"] == "Bearer old"
    assert new.headers["authorization"] == "Bearer new"
    assert old.body == new.body == MESSAGE
    assert credential.failed[0] == {"authorization": "Bearer old"}
    assert len(server.requests) == 3


async def test_a_static_credential_passes_a_401_through(
    server: FakeModelServer, proxy: ModelProxy
) -> None:
    server.add(ApiError("bad key", status=401))
    async with httpx2.AsyncClient() as client:
        response = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "bad key"
    assert len(server.requests) == 1


# --------------------------------------------------------------------------- streaming


async def test_the_first_event_arrives_while_the_model_is_still_answering(
    server: FakeModelServer, proxy: ModelProxy
) -> None:
    hang = Hang(then=Text("After the wait."))
    server.add(hang)
    async with (
        httpx2.AsyncClient() as client,
        client.stream(
            "POST", proxy.engine_base_url + "/v1/messages", json={**MESSAGE, "stream": True}
        ) as response,
    ):
        chunks = response.aiter_raw()
        first = await anext(chunks)
        # The upstream has not finished (it cannot, until released): nothing was buffered.
        assert b"message_start" in first
        assert not hang.released
        hang.release()
        rest = b"".join([chunk async for chunk in chunks])
    assert b"After the wait." not in first
    assert b"After" in rest
    assert rest.rstrip().endswith(b'{"type": "message_stop"}')


async def test_deltas_arrive_one_by_one_as_the_model_sends_them(
    server: FakeModelServer, proxy: ModelProxy
) -> None:
    server.add(Text("one two three four five six", chunk_delay_s=0.15))
    reads: list[bytes] = []
    async with (
        httpx2.AsyncClient() as client,
        client.stream(
            "POST", proxy.engine_base_url + "/v1/messages", json={**MESSAGE, "stream": True}
        ) as response,
    ):
        reads = [chunk async for chunk in response.aiter_raw()]
    deltas = [read.count(b"event: content_block_delta") for read in reads]
    # Each later word is its own read: the proxy passed each on before the next existed.
    assert sum(deltas) == 6
    assert deltas.count(1) >= 5, deltas
    assert reads.index(next(r for r in reads if b"six" in r)) > reads.index(
        next(r for r in reads if b"one" in r)
    )


async def test_compressed_bodies_pass_through_undecoded() -> None:
    import gzip

    payload = gzip.compress(b'{"ok": true}')

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload
        )
        await writer.drain()
        writer.close()

    fake = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = fake.sockets[0].getsockname()[1]
    async with running(f"http://127.0.0.1:{port}") as proxy:
        response = await raw(proxy, b"GET /x HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
    fake.close()
    head, body = response.split(b"\r\n\r\n", 1)
    assert b"content-encoding: gzip" in head.lower()
    assert body == payload


async def test_an_engine_that_hangs_up_mid_stream_does_not_hurt_the_proxy(
    server: FakeModelServer, proxy: ModelProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="shadowclone.proxy")
    server.add(Hang())
    reader, writer = await asyncio.open_connection(*endpoint(proxy))
    body = json.dumps({**MESSAGE, "stream": True}).encode()
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    assert b"message_start" in await reader.readuntil(b"message_start")
    writer.close()
    async with asyncio.timeout(10):
        while "the engine went away" not in caplog.text:
            await asyncio.sleep(0.02)
    server.add(Text("Still here."))
    async with httpx2.AsyncClient() as client:
        response = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
    assert response.json()["content"][0]["text"] == "Still here."


async def test_the_request_body_streams_to_the_provider() -> None:
    first_half = asyncio.Event()
    received = bytearray()
    heads: list[bytes] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        received.extend(await reader.readexactly(5))
        first_half.set()
        received.extend(await reader.readexactly(5))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    fake = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = fake.sockets[0].getsockname()[1]
    async with running(f"http://127.0.0.1:{port}") as proxy:
        reader, writer = await asyncio.open_connection(*endpoint(proxy))
        writer.write(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
        async with asyncio.timeout(10):
            await first_half.wait()  # the provider has the first half before the rest exists
            writer.write(b"world")
            response = await reader.readuntil(b"ok")
        writer.close()
    fake.close()
    assert status_of(response) == 200
    assert received == b"helloworld"
    assert b"content-length: 10\r\n" in heads[0].lower()


# --------------------------------------------------------------------------- refusals


async def test_paths_outside_the_base_path_are_refused(server: FakeModelServer) -> None:
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
    name: str, server: FakeModelServer, other: FakeModelServer, proxy: ModelProxy
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
    server: FakeModelServer, other: FakeModelServer, proxy: ModelProxy
) -> None:
    target = b"/v1/models%0d%0aX-Evil:%201%0d%0aHost:%20127.0.0.1:" + str(other.port).encode()
    response = await raw(proxy, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
    assert status_of(response) == 403
    assert server.requests == other.requests == []


async def test_an_unreachable_provider_is_a_502_in_one_line() -> None:
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


async def test_a_unix_socket(server: FakeModelServer, tmp_path: Path) -> None:
    socket = tmp_path / "proxy.sock"
    async with ModelProxy(server.openai_url, StaticCredential({"x-api-key": REAL_KEY})) as proxy:
        await proxy.start_unix(socket)
        assert proxy.engine_base_url == "http://localhost/v1"
        transport = httpx2.AsyncHTTPTransport(uds=str(socket))
        async with httpx2.AsyncClient(transport=transport) as client:
            assert (await client.get(proxy.engine_base_url + "/models")).status_code == 200
    assert not socket.exists()
    assert_clean(server.requests[0], {"x-api-key": REAL_KEY})


# --------------------------------------------------------------------------- header sets

TOKEN = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,15}", fullmatch=True)
SENSITIVE = sorted(ENGINE_AUTH_HEADERS | HOP_BY_HOP | {"anthropic-beta", "expect", "x-api-key"})
NAME = st.one_of(
    st.sampled_from(SENSITIVE).flatmap(
        lambda name: st.builds(
            lambda flips: "".join(c.upper() if f else c for c, f in zip(name, flips, strict=False)),
            st.lists(st.booleans(), min_size=len(name), max_size=len(name)),
        )
    ),
    TOKEN,
).filter(lambda name: name.lower() not in {"content-length", "transfer-encoding", "host"})
VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip)
HEADER_SETS = st.lists(st.tuples(NAME, VALUE), max_size=12)
CREDENTIALS = st.sampled_from(
    [
        {"x-api-key": REAL_KEY},
        {"authorization": "Bearer real", "anthropic-beta": "oauth-2025-04-20"},
        {"authorization": "Bearer real"},
    ]
)


@given(headers=HEADER_SETS, credential=CREDENTIALS)
def test_upstream_headers_hold_the_credential_once_and_nothing_dropped(
    headers: list[tuple[str, str]], credential: dict[str, str]
) -> None:
    engine = [(name.encode(), value.encode()) for name, value in headers]
    result = [
        (name.decode(), value.decode()) for name, value in upstream_headers(engine, credential)
    ]
    names = [name.lower() for name, _ in result]
    for name, value in credential.items():
        assert names.count(name) == 1
        (sent,) = [v for n, v in result if n.lower() == name]
        if name == "anthropic-beta":
            assert "oauth-2025-04-20" in sent.split(",")
        else:
            assert sent == value
    assert not (set(names) - set(credential)) & REQUEST_DROPPED


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(headers=HEADER_SETS)
async def test_any_header_set_reaches_the_upstream_clean(
    headers: list[tuple[str, str]], server: FakeModelServer, proxy: ModelProxy
) -> None:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    hostile = f"x-api-key: {PLACEHOLDER}\r\nAuthorization: Bearer {PLACEHOLDER}\r\n"
    data = f"GET /v1/models HTTP/1.1\r\nHost: evil\r\n{hostile}{head}Connection: close\r\n\r\n"
    before = len(server.requests)
    response = await raw(proxy, data.encode())
    if status_of(response) == 400:  # h11 refused it (an Expect it cannot meet...): nothing sent
        assert len(server.requests) == before
        return
    assert status_of(response) == 200
    request = server.requests[-1]
    assert_clean(request, {"x-api-key": REAL_KEY})
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    listed = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    dropped = REQUEST_DROPPED | listed
    assert not (set(request.headers) - {"host", "x-api-key"}) & dropped
    last = {name.lower(): value for name, value in headers}
    for name, value in last.items():
        if name not in dropped:
            assert request.headers[name] == value


# --------------------------------------------------------------------------- the command


def write_secrets(folder: Path, **values: str) -> Path:
    path = folder / "secrets.toml"
    path.write_text("".join(f'{key} = "{value}"\n' for key, value in values.items()))
    return path


def proxy_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "shadowclone.proxy", *map(str, args)]


def test_the_command_serves_on_a_socket_until_sigterm(
    server: FakeModelServer, tmp_path: Path
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
    login: str, server: FakeModelServer, tmp_path: Path
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
