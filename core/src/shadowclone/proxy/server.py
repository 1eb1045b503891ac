"""The model proxy: a small HTTP/1.1 server (asyncio + h11) that forwards to one provider.

Why not uvicorn/starlette: the proxy must pass bytes through as they come (SSE streams, gzip
bodies it must not decode) and refuse anything odd before it can reach the network; a
framework adds parsing, buffering and a layer of tasks between the socket and the upstream
client for none of that. h11 parses and frames HTTP (and bounds the size of a request head);
httpx2 talks to the provider, through an outbound HTTP(S) proxy when there is one.

What it guarantees, whatever the engine sends:
- requests go only to the configured upstream origin, under its base path; anything else (an
  absolute URL, CONNECT, TRACE, a path with dot segments) is refused before any network use;
- the engine's authentication headers are removed and the credential's set (`credentials`);
- the response is streamed back chunk by chunk as the provider sends it, not decoded;
- log lines carry the method, the path and the status, never a header value or a body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote

import h11
import httpx2

from shadowclone import httpio
from shadowclone.errors import BadInput
from shadowclone.proxy.backoff import RETRIED_STATUSES, Backoff, retry_after
from shadowclone.proxy.credentials import ENGINE_AUTH_HEADERS, LIST_HEADERS, Credential
from shadowclone.proxy.limits import MAX_ERROR_BYTES, usage_limit_reset

log = logging.getLogger(__name__)

HOP_BY_HOP: frozenset[str] = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 7.6.1): never forwarded,
in either direction, nor are the headers a Connection header names."""

REQUEST_DROPPED: frozenset[str] = HOP_BY_HOP | ENGINE_AUTH_HEADERS | {"host", "expect"}
"""Removed from every engine request: Host is the upstream's, and the proxy answers a
100-continue itself."""

ALLOWED_METHODS: frozenset[str] = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
)
"""What a model API uses. Not CONNECT (a tunnel elsewhere) nor TRACE (it would echo the
injected credential back to the engine)."""

MAX_HEAD_BYTES = 64 * 1024
"""A request line and headers larger than this are refused (431)."""
MAX_REPLAY_BYTES = 32 * 1024 * 1024
"""A request body up to this size is kept until the response starts, so a request the provider
answered 401 can be sent again after the credential renewed itself."""
IDLE_TIMEOUT_S = 300.0
"""How long a connection may wait for its next request before the proxy closes it."""
UPSTREAM_TIMEOUT = httpx2.Timeout(connect=30.0, read=600.0, write=60.0, pool=30.0)
"""Reads wait long: a model may think for minutes before its first token."""
LOGGED_PATH_CHARS = 200


class ProxyError(BadInput):
    """The proxy cannot be set up as asked (a bad upstream URL, a socket in use)."""


# --------------------------------------------------------------------------- rules


def refusal(method: str, target: bytes, prefix: str) -> tuple[int, str] | None:
    """Why a request must not be forwarded (status, one line), or None to forward it.

    `target` is the raw request target; only origin-form (`/path?query`) under `prefix` (the
    upstream base URL's path, without a trailing slash) is served.
    """
    if method == "CONNECT":
        return 405, "CONNECT is refused: this proxy forwards to one model provider only"
    if method not in ALLOWED_METHODS:
        return 405, f"method {method[:20]!r} is refused"
    try:
        text = target.decode("ascii")
    except UnicodeDecodeError:
        return 400, "the request target is not ASCII"
    if not text.startswith("/") or text.startswith("//"):
        return 403, "only a path is served here, not an absolute URL or another host"
    path = text.split("?", 1)[0]
    decoded = unquote(path)
    if "#" in text or "\\" in decoded or any(ord(char) < 0x20 for char in decoded):
        return 403, "the path holds a character that is refused (#, backslash, control)"
    if any(segment in (".", "..") for segment in decoded.split("/")):
        return 403, "the path holds a dot segment"
    if prefix and path != prefix and not path.startswith(prefix + "/"):
        return 403, f"the path is outside {prefix}/, the only one this proxy serves"
    return None


def _connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> set[str]:
    """The header names a Connection header lists: hop-by-hop for this message."""
    return {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.decode("latin-1").split(",")
        if token.strip()
    }


def _merge_list(engine: str | None, ours: str) -> str:
    """`engine`'s comma-separated tokens, then those of `ours` it lacks."""
    tokens = [token.strip() for token in (engine or "").split(",") if token.strip()]
    tokens += [token.strip() for token in ours.split(",") if token.strip() not in tokens]
    return ",".join(token for token in tokens if token)


def upstream_headers(
    engine: Iterable[tuple[bytes, bytes]], credential: Mapping[str, str]
) -> list[tuple[bytes, bytes]]:
    """The headers of the upstream request: the engine's minus hop-by-hop, Host and its
    authentication, plus the credential's. A credential header in `LIST_HEADERS` is added to
    the engine's value; every other credential header replaces whatever the engine sent."""
    engine = [(name.lower(), value) for name, value in engine]
    ours = {name.lower(): value for name, value in credential.items()}
    dropped = REQUEST_DROPPED | _connection_tokens(engine) | set(ours)
    if any(name == b"transfer-encoding" for name, _ in engine):
        dropped |= {"content-length"}  # the body is re-framed as chunked
    kept: list[tuple[bytes, bytes]] = []
    lists: dict[str, list[str]] = {}
    for raw_name, raw_value in engine:
        name = raw_name.decode("latin-1")
        if name in LIST_HEADERS and name in ours:
            lists.setdefault(name, []).append(raw_value.decode("latin-1"))
        elif name not in dropped:
            kept.append((raw_name, raw_value))
    for name, value in ours.items():
        merged = (
            _merge_list(",".join(lists.get(name, [])), value) if name in LIST_HEADERS else value
        )
        kept.append((name.encode("latin-1"), merged.encode("latin-1")))
    return kept


def response_headers(upstream: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The provider's response headers minus hop-by-hop ones; h11 frames the body again."""
    upstream = list(upstream)
    dropped = HOP_BY_HOP | _connection_tokens(upstream)
    return [(name, value) for name, value in upstream if name.lower().decode() not in dropped]


def _logged_path(target: bytes) -> str:
    """The path for a log line: no query (it may carry a key), bounded, repr-quoted."""
    path = target.split(b"?", 1)[0].decode("ascii", "replace")
    return repr(path[:LOGGED_PATH_CHARS])


# --------------------------------------------------------------------------- one connection


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
        path = _logged_path(request.target)
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


# --------------------------------------------------------------------------- the proxy


class ModelProxy:
    """A credential-injecting reverse proxy to one model provider.

    The engine is given `engine_base_url` and a placeholder key; every request it sends under
    that URL reaches `upstream_base_url` with `credential`'s headers instead of its own.

        async with ModelProxy("https://api.anthropic.com", credential) as proxy:
            await proxy.start_tcp()
            env = {"ANTHROPIC_BASE_URL": proxy.engine_base_url, ...}
    """

    def __init__(
        self,
        upstream_base_url: str,
        credential: Credential,
        *,
        outbound_proxy: str | None = None,
    ) -> None:
        try:
            upstream = httpx2.URL(upstream_base_url)
        except httpx2.InvalidURL as error:
            raise ProxyError(f"bad upstream URL {upstream_base_url!r}: {error}") from None
        if upstream.scheme not in ("http", "https") or not upstream.host:
            raise ProxyError(f"bad upstream URL {upstream_base_url!r}: want http(s)://host[/path]")
        if upstream.query or upstream.fragment or upstream.userinfo:
            raise ProxyError(f"bad upstream URL {upstream_base_url!r}: no query, fragment or user")
        self.upstream_base = str(upstream)
        """The provider base URL, as configured."""
        self.upstream = upstream.copy_with(raw_path=b"/")
        self.prefix = upstream.raw_path.decode("ascii").rstrip("/")
        """The upstream base path without a trailing slash ("" for the whole host)."""
        self.credential = credential
        self.backoff: Callable[[], Backoff] = Backoff
        """The waits between the sends of one request to an overloaded provider."""
        self.on_overload: Callable[[int], None] | None = None
        """Told of each answer of an overloaded provider (its status; 0: unreachable) before
        the request is sent again."""
        self.on_usage_limit: Callable[[datetime], Awaitable[bool]] | None = None
        """Called when the provider says the login's usage limit is reached, with when it
        resets; it waits (the engine's request held) and says whether to send it again."""
        self.gate: Callable[[], Awaitable[None]] | None = None
        """Awaited before each request goes out, and before each send again: the run program
        holds the engine's requests there while a cap is reached."""
        try:
            self._outbound = None if outbound_proxy is None else httpx2.Proxy(outbound_proxy)
        except (ValueError, httpx2.InvalidURL) as error:
            raise ProxyError(f"bad outbound proxy URL: {error}") from None
        self._client: asyncio.Future[httpx2.AsyncClient] | None = None
        """The upstream client, made in a thread when `prepare_client` asks for it or the first
        request needs it (its imports and TLS context take tens of milliseconds, which neither
        the proxy's start nor the clone's first steps should wait for)."""
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[object]] = set()
        self._origin: str | None = None
        self._socket: Path | None = None
        self._listening: list[str] = []
        self._closing = False

    def _new_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            proxy=self._outbound,
            # No proxy variables, .netrc or redirects: the destination is ours alone.
            trust_env=False,
            follow_redirects=False,
            timeout=UPSTREAM_TIMEOUT,
            limits=httpx2.Limits(max_connections=None, keepalive_expiry=30.0),
        )

    def prepare_client(self) -> asyncio.Future[httpx2.AsyncClient]:
        """Begin making the upstream client, in a thread, if it is not made yet: its owner
        calls this when the engine is about to need it."""
        if self._client is None:
            self._client = asyncio.ensure_future(asyncio.to_thread(self._new_client))
        return self._client

    async def client(self) -> httpx2.AsyncClient:
        """The client that sends to the provider."""
        return await self.prepare_client()

    async def start_tcp(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on `host`:`port` (0: any free port; see `engine_base_url`)."""
        try:
            server = await asyncio.start_server(self._on_connection, host, port)
        except OSError as error:
            raise ProxyError(f"cannot listen on {host}:{port}: {error.strerror}") from None
        self._servers.append(server)
        bound = server.sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self._origin = f"http://{shown}:{bound}"
        self._listening.append(self._origin)

    async def start_unix(self, path: str | os.PathLike[str]) -> None:
        """Listen on a Unix socket at `path` (for a sidecar sharing a folder with the engine)."""
        socket = Path(path)
        try:
            server = await asyncio.start_unix_server(self._on_connection, socket)
        except OSError as error:
            raise ProxyError(f"cannot listen on {socket}: {error.strerror}") from None
        self._servers.append(server)
        self._socket = socket
        self._listening.append(f"unix:{socket}")
        if self._origin is None:
            self._origin = "http://localhost"

    @property
    def engine_base_url(self) -> str:
        """The base URL to give the engine: this proxy's origin plus the upstream base path.

        The origin is the address as bound (for 0.0.0.0, give the engine the name it reaches
        this host by); on a Unix socket alone it is `http://localhost`, and the client dials
        the socket."""
        if self._origin is None:
            raise RuntimeError("the model proxy is not started")
        return self._origin + self.prefix

    @property
    def listening_on(self) -> str:
        """Where it listens, for a person: origins and socket paths."""
        return ", ".join(self._listening)

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        httpio.send_at_once(writer)
        try:
            await _Connection(self, reader, writer).serve()
        except (ConnectionError, _EngineGone, asyncio.IncompleteReadError):
            pass  # the engine hung up; nothing to tell it
        except asyncio.CancelledError:
            # close() ends the connections; ending quietly keeps asyncio (3.11) from reporting
            # each cancelled connection task as an unhandled error.
            if not self._closing:
                raise
        except h11.ProtocolError as error:
            log.info("connection closed on a protocol error: %s", type(error).__name__)
        except Exception:
            # A bug must not take the proxy down with it; the connection is closed below.
            log.exception("model proxy: unexpected error on a connection")
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def close(self) -> None:
        """Stop listening, end open connections, release the upstream client."""
        self._closing = True
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        if self._client is not None:
            # A client that could not be made (its failure was each request's) has nothing
            # to release.
            (client,) = await asyncio.gather(self._client, return_exceptions=True)
            if isinstance(client, httpx2.AsyncClient):
                await client.aclose()
        if self._socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self._socket.unlink()

    async def __aenter__(self) -> ModelProxy:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
