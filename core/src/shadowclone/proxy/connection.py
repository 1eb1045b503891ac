"""One engine connection of the model proxy: its requests in turn, each forwarded upstream.

Why not uvicorn/starlette: the proxy must pass bytes through as they come (SSE streams, gzip
bodies it must not decode) and refuse anything odd before it can reach the network; a
framework adds parsing, buffering and a layer of tasks between the socket and the upstream
client for none of that. h11 parses and frames HTTP (and bounds the size of a request head).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import h11
import httpx2

from shadowclone import httpio
from shadowclone.proxy.backoff import RETRIED_STATUSES, Backoff, retry_after
from shadowclone.proxy.limits import MAX_ERROR_BYTES, usage_limit_reset
from shadowclone.proxy.rules import logged_path, refusal, response_headers, upstream_headers

if TYPE_CHECKING:
    from shadowclone.proxy.server import ModelProxy

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
"""A request line and headers larger than this are refused (431)."""
MAX_REPLAY_BYTES = 32 * 1024 * 1024
"""A request body up to this size is kept until the response starts, so a request the provider
answered 401 can be sent again after the credential renewed itself."""
IDLE_TIMEOUT_S = 300.0
"""How long a connection may wait for its next request before the proxy closes it."""


class _EngineGone(Exception):
    """The engine closed its connection: nothing more can be sent to it."""


class _BadGateway(Exception):
    """The provider could not be reached or failed before its response began."""


EXPECTED_FAILURES: tuple[type[BaseException], ...] = (
    _EngineGone,
    ConnectionError,
    httpx2.HTTPError,
    h11.ProtocolError,
)
"""How an exchange ends early without a bug: either side hung up or broke the protocol."""


class _Connection:
    """One engine connection: requests one after another (keep-alive), each forwarded."""

    def __init__(
        self, proxy: ModelProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)

    async def next_event(self) -> h11.Event | type[h11.PAUSED]:
        return await httpio.next_event(self.h11, self.reader)

    def send(self, event: h11.Event) -> None:
        data = self.h11.send(event)
        if data:
            self.writer.write(data)

    async def serve(self) -> None:
        while True:
            try:
                async with asyncio.timeout(IDLE_TIMEOUT_S):
                    event = await self.next_event()
            except h11.RemoteProtocolError as error:
                await self.reply(error.error_status_hint, "bad request: the request is malformed")
                log.info("refused a malformed request: %d", error.error_status_hint)
                return
            except TimeoutError:
                return
            if not isinstance(event, h11.Request):
                return  # ConnectionClosed, or PAUSED after a protocol switch we never accept
            if not await self.exchange(event):
                return
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return  # the request was refused before its body was read: close

    async def reply(self, status: int, line: str) -> None:
        """A short plain-text answer of the proxy's own; the connection closes after it."""
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = (line + "\n").encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
            self.send(h11.Response(status_code=status, headers=headers))
            self.send(h11.Data(data=body))
            self.send(h11.EndOfMessage())
            await self.writer.drain()
        await self.linger()

    async def linger(self) -> None:
        await httpio.linger(self.reader, self.writer)

    async def exchange(self, request: h11.Request) -> bool:
        """Answer one request; False when the connection must close after it."""
        method = request.method.decode("ascii", "replace")
        path = logged_path(request.target)
        refused = refusal(method, request.target, self.proxy.prefix)
        names = {name for name, _ in request.headers}
        if refused is None and {b"content-length", b"transfer-encoding"} <= names:
            # Two framings of one body: how request smuggling starts (RFC 9112 6.1).
            refused = 400, "bad request: both Content-Length and Transfer-Encoding"
        if refused is not None:
            status, line = refused
            await self.reply(status, line)
            log.info("%s %s -> %d (refused)", method[:20], path, status)
            return False
        body = _RequestBody(self)
        forward = asyncio.create_task(self.forward(request, body))
        gone = asyncio.create_task(self.watch_for_hangup(body))
        try:
            await asyncio.wait((forward, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (forward, gone):
                task.cancel()
            await asyncio.gather(forward, gone, return_exceptions=True)
        error = None if forward.cancelled() else forward.exception()
        if isinstance(error, _BadGateway):
            await self.reply(502, f"bad gateway: the model provider could not be reached ({error})")
            log.info("%s %s -> 502 (%s)", method, path, error)
            return False
        if forward.cancelled() or error is not None:
            if error is not None and not isinstance(error, EXPECTED_FAILURES):
                log.error("%s %s -> aborted", method, path, exc_info=error)
            else:
                reason = type(error).__name__ if error else "the engine went away"
                log.info("%s %s -> aborted (%s)", method, path, reason)
            return False
        status = forward.result()
        log.info("%s %s -> %d", method, path, status)
        return self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE

    async def _unreachable(
        self,
        backoff: Backoff,
        error: httpx2.TransportError,
        body: _RequestBody,
        send_again: Callable[[], Awaitable[httpx2.Response | None]],
    ) -> httpx2.Response | None:
        """The provider could not be reached (refused, reset before an answer): send again
        after the backoff, while tries last and the body can be sent again; else None."""
        if body.hung_up:
            return None
        await body.drain()  # the rest of it, kept for the next send
        while (wait := backoff.next()) is not None:
            log.info("the provider could not be reached (%s); again in %.1f s", error, wait)
            if self.proxy.on_overload is not None:
                self.proxy.on_overload(0)
            await asyncio.sleep(wait)
            try:
                return await send_again()
            except httpx2.TransportError as again:
                error = again
        return None

    async def watch_for_hangup(self, body: _RequestBody) -> None:
        """Return when the engine closes the connection while its response is pending, so the
        upstream request is abandoned at once (a stopped turn must stop the model call)."""
        await body.finished.wait()
        data = await self.reader.read(httpio.READ_SIZE)
        if data:  # a pipelined next request: keep it for later, stop watching
            self.h11.receive_data(data)
            await asyncio.Event().wait()

    async def forward(self, request: h11.Request, body: _RequestBody) -> int:
        """Send the request upstream and stream the answer back; returns the status."""
        proxy = self.proxy
        framing = (b"content-length", b"transfer-encoding")
        framed = any(name in framing for name, _ in request.headers)
        content: bytes | AsyncIterator[bytes] = body.chunks() if framed else b""
        if not framed:
            await body.drain()
        if proxy.gate is not None:
            await proxy.gate()
        url = proxy.upstream.copy_with(raw_path=request.target)
        method = request.method.decode("ascii")
        sent = await proxy.credential.headers()
        headers = upstream_headers(request.headers, sent)
        backoff = proxy.backoff()

        async def send_again() -> httpx2.Response | None:
            """The kept body sent again, with fresh credential headers; None if it cannot be."""
            replay = body.replay()
            if replay is None:
                return None
            if proxy.gate is not None:
                await proxy.gate()
            again = upstream_headers(request.headers, await proxy.credential.headers())
            return await (await proxy.client()).send(
                httpx2.Request(method, url, headers=again, content=replay), stream=True
            )

        try:
            try:
                response = await (await proxy.client()).send(
                    httpx2.Request(method, url, headers=headers, content=content), stream=True
                )
            except httpx2.TransportError as error:
                retried = await self._unreachable(backoff, error, body, send_again)
                if retried is None:
                    raise
                response = retried
            refresh = response.status_code == 401 and await proxy.credential.refreshed(sent)
            if refresh and (replayed := await _replacing(response, send_again)) is not None:
                response = replayed
            prefetched = None
            while response.status_code in RETRIED_STATUSES and body.replay() is not None:
                prefetched = await _small_body(response)
                reset = None
                if response.status_code == 429 and proxy.on_usage_limit is not None:
                    now = datetime.now(UTC)
                    reset = usage_limit_reset(429, response.headers, prefetched or b"", now)
                if reset is not None:
                    log.info("%s %s -> 429: usage limit until %s", method, url.path, reset)
                    assert proxy.on_usage_limit is not None
                    if not await proxy.on_usage_limit(reset):
                        break
                else:
                    wait = backoff.next(retry_after(response.headers))
                    if wait is None:
                        break
                    log.info(
                        "%s %s -> %d: overloaded; sending again in %.1f s",
                        method,
                        url.path,
                        response.status_code,
                        wait,
                    )
                    if proxy.on_overload is not None:
                        proxy.on_overload(response.status_code)
                    await asyncio.sleep(wait)
                await response.aclose()
                prefetched = None
                try:
                    retried = await send_again()
                except httpx2.TransportError as error:
                    retried = await self._unreachable(backoff, error, body, send_again)
                if retried is None:
                    raise _BadGateway("the provider could not be reached again")
                response = retried
        except httpx2.HTTPError as error:
            if body.hung_up:
                raise _EngineGone from None
            raise _BadGateway(type(error).__name__) from None
        try:
            body.forget()
            self.send(
                h11.Response(
                    status_code=response.status_code,
                    headers=response_headers(response.headers.raw),
                    reason=response.reason_phrase.encode("latin-1", "replace"),
                )
            )
            chunks = response.aiter_raw() if prefetched is None else _once(prefetched)
            async for chunk in chunks:
                self.send(h11.Data(data=chunk))
                await self.writer.drain()
            self.send(h11.EndOfMessage())
            await self.writer.drain()
        finally:
            await response.aclose()
        return response.status_code


async def _replacing(
    response: httpx2.Response, send_again: Callable[[], Awaitable[httpx2.Response | None]]
) -> httpx2.Response | None:
    """A new answer in place of `response` (closed), or None and `response` kept."""
    replayed = await send_again()
    if replayed is not None:
        await response.aclose()
    return replayed


async def _small_body(response: httpx2.Response) -> bytes | None:
    """An error's raw bytes, read whole when it says it is small (Content-Length); None, and
    nothing read, otherwise."""
    length = response.headers.get("content-length", "")
    if not length.isdigit() or int(length) > MAX_ERROR_BYTES:
        return None
    data = bytearray()
    async for chunk in response.aiter_raw():
        data += chunk
    return bytes(data)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class _RequestBody:
    """The engine's request body as the upstream client reads it: passed on chunk by chunk,
    and kept (up to MAX_REPLAY_BYTES) until the response starts, for one retry."""

    def __init__(self, connection: _Connection) -> None:
        self.connection = connection
        self.finished = asyncio.Event()
        self.hung_up = False
        self._kept: bytearray | None = bytearray()

    async def chunks(self) -> AsyncIterator[bytes]:
        connection = self.connection
        if connection.h11.they_are_waiting_for_100_continue:
            connection.send(h11.InformationalResponse(status_code=100, headers=[]))
        while True:
            try:
                event = await connection.next_event()
            except h11.RemoteProtocolError:
                self.hung_up = True
                raise
            if isinstance(event, h11.Data):
                if self._kept is not None:
                    self._kept += event.data
                    if len(self._kept) > MAX_REPLAY_BYTES:
                        self._kept = None
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.finished.set()
                return
            else:
                self.hung_up = True
                raise _EngineGone

    async def drain(self) -> None:
        async for _ in self.chunks():
            pass

    def replay(self) -> bytes | None:
        """The whole body again, or None if it was too large to keep or is not all read."""
        if self._kept is None or not self.finished.is_set():
            return None
        return bytes(self._kept)

    def forget(self) -> None:
        self._kept = None


async def serve_connection(
    proxy: ModelProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve one engine connection to its end; whatever ends it is logged, never raised (but a
    cancel), so a bug in one exchange cannot take the proxy down."""
    try:
        await _Connection(proxy, reader, writer).serve()
    except (ConnectionError, _EngineGone, asyncio.IncompleteReadError):
        pass  # the engine hung up; nothing to tell it
    except h11.ProtocolError as error:
        log.info("connection closed on a protocol error: %s", type(error).__name__)
    except Exception:
        # A bug must not take the proxy down with it; the listener closes the connection.
        log.exception("model proxy: unexpected error on a connection")
