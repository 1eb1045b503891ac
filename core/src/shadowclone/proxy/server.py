"""The model proxy: a small HTTP/1.1 server (asyncio + h11) that forwards to one provider.

What it guarantees, whatever the engine sends:
- requests go only to the configured upstream origin, under its base path; anything else (an
  absolute URL, CONNECT, TRACE, a path with dot segments) is refused before any network use
  (`rules`);
- the engine's authentication headers are removed and the credential's set (`credentials`);
- the response is streamed back chunk by chunk as the provider sends it, not decoded
  (`connection`);
- log lines carry the method, the path and the status, never a header value or a body.

httpx2 talks to the provider (`upstream`), through an outbound HTTP(S) proxy when there is one;
`listeners` holds the sockets and the open connections.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

import httpx2

from shadowclone.closing import AsyncClosing
from shadowclone.errors import BadInput
from shadowclone.proxy.backoff import Backoff
from shadowclone.proxy.connection import serve_connection
from shadowclone.proxy.credentials import Credential
from shadowclone.proxy.listeners import Listeners
from shadowclone.proxy.upstream import UpstreamClient, new_client


class ProxyError(BadInput):
    """The proxy cannot be set up as asked (a bad upstream URL, a socket in use)."""


class ModelProxy(AsyncClosing):
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
            outbound = None if outbound_proxy is None else httpx2.Proxy(outbound_proxy)
        except (ValueError, httpx2.InvalidURL) as error:
            raise ProxyError(f"bad outbound proxy URL: {error}") from None
        self._outbound = outbound
        self._upstream_client = UpstreamClient(self._new_client)
        self._listeners = Listeners(self._serve)

    def _new_client(self) -> httpx2.AsyncClient:
        return new_client(self._outbound)

    def prepare_client(self) -> asyncio.Future[httpx2.AsyncClient]:
        """Begin making the upstream client, in a thread, if it is not made yet: its owner
        calls this when the engine is about to need it."""
        return self._upstream_client.prepare()

    async def client(self) -> httpx2.AsyncClient:
        """The client that sends to the provider."""
        return await self._upstream_client.get()

    async def start_tcp(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on `host`:`port` (0: any free port; see `engine_base_url`)."""
        try:
            await self._listeners.start_tcp(host, port)
        except OSError as error:
            raise ProxyError(f"cannot listen on {host}:{port}: {error.strerror}") from None

    async def start_unix(self, path: str | os.PathLike[str]) -> None:
        """Listen on a Unix socket at `path` (for a sidecar sharing a folder with the engine)."""
        try:
            await self._listeners.start_unix(path)
        except OSError as error:
            raise ProxyError(f"cannot listen on {Path(path)}: {error.strerror}") from None

    @property
    def engine_base_url(self) -> str:
        """The base URL to give the engine: this proxy's origin plus the upstream base path.

        The origin is the address as bound (for 0.0.0.0, give the engine the name it reaches
        this host by); on a Unix socket alone it is `http://localhost`, and the client dials
        the socket."""
        if self._listeners.origin is None:
            raise RuntimeError("the model proxy is not started")
        return self._listeners.origin + self.prefix

    @property
    def listening_on(self) -> str:
        """Where it listens, for a person: origins and socket paths."""
        return self._listeners.listening_on

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(self, reader, writer)

    async def close(self) -> None:
        """Stop listening, end open connections, release the upstream client."""
        await self._listeners.stop()
        await self._upstream_client.close()
        self._listeners.remove_socket()
