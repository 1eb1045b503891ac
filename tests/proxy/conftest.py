"""The model proxy's test fixtures: the fake model server, a running proxy before it, and the
helpers the proxy's test files share (raw requests, the clean-credential check)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from urllib.parse import urlsplit

import pytest
from shadowclone.proxy import ENGINE_AUTH_HEADERS, Credential, ModelProxy, StaticCredential
from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest

REAL_KEY = "sk-ant-real-key-0123456789"
"""The credential `running` injects by default: the test files' REAL_KEY."""

Running = Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]]


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
async def _running(
    upstream: str, credential: Credential | None = None
) -> AsyncIterator[ModelProxy]:
    credential = credential or StaticCredential({"x-api-key": REAL_KEY})
    async with ModelProxy(upstream, credential) as proxy:
        await proxy.start_tcp()
        yield proxy


@pytest.fixture
def running() -> Running:
    """`running(upstream, credential=None)`: a proxy listening on loopback while in the block."""
    return _running


@pytest.fixture
async def proxy(server: FakeModelServer) -> AsyncIterator[ModelProxy]:
    async with _running(server.url) as proxy:
        yield proxy


def _assert_clean(request: ModelRequest, headers: Mapping[str, str]) -> None:
    """The upstream request carries exactly the credential, and nothing of the engine's auth."""
    for name, value in request.headers.items():
        assert "shadowclone-placeholder" not in value, name
    for name in ENGINE_AUTH_HEADERS - set(headers):
        assert name not in request.headers, name
    for name, value in headers.items():
        assert request.headers[name] == value


@pytest.fixture
def assert_clean() -> Callable[[ModelRequest, Mapping[str, str]], None]:
    return _assert_clean


def _endpoint(proxy: ModelProxy) -> tuple[str, int]:
    url = urlsplit(proxy.engine_base_url)
    assert url.hostname and url.port
    return url.hostname, url.port


@pytest.fixture
def endpoint() -> Callable[[ModelProxy], tuple[str, int]]:
    """The proxy's host and port, to open a connection of one's own."""
    return _endpoint


async def _raw(proxy: ModelProxy, data: bytes) -> bytes:
    """Send bytes to the proxy as they are and read its answer until it closes."""
    reader, writer = await asyncio.open_connection(*_endpoint(proxy))
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.read(-1)
    finally:
        writer.close()


@pytest.fixture
def raw() -> Callable[[ModelProxy, bytes], Awaitable[bytes]]:
    return _raw


def _status_of(response: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    assert match, response[:200]
    return int(match.group(1))


@pytest.fixture
def status_of() -> Callable[[bytes], int]:
    """The status of a raw HTTP/1.1 response."""
    return _status_of
