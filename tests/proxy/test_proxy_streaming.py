"""The model proxy streams both ways: each event of the answer as the model sends it, bodies
undecoded, the request body as the engine sends it, and an engine hanging up mid-stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

import httpx2
import pytest
from shadowclone.proxy import ModelProxy
from shadowclone_testing.fakes.models import FakeModelServer, Hang, Text

pytestmark = pytest.mark.anyio

MESSAGE = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


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


async def test_compressed_bodies_pass_through_undecoded(
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
    raw: Callable[[ModelProxy, bytes], Awaitable[bytes]],
) -> None:
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
    server: FakeModelServer,
    proxy: ModelProxy,
    caplog: pytest.LogCaptureFixture,
    endpoint: Callable[[ModelProxy], tuple[str, int]],
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


async def test_the_request_body_streams_to_the_provider(
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
    endpoint: Callable[[ModelProxy], tuple[str, int]],
    status_of: Callable[[bytes], int],
) -> None:
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
