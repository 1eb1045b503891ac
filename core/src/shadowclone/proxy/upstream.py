"""The model proxy's client to the provider, made off the event loop when first wanted.

Its imports and TLS context take tens of milliseconds, which neither the proxy's start nor the
clone's first steps should wait for: it is made in a thread, once, when its owner says the
engine is about to need it or the first request does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx2

UPSTREAM_TIMEOUT = httpx2.Timeout(connect=30.0, read=600.0, write=60.0, pool=30.0)
"""Reads wait long: a model may think for minutes before its first token."""


def new_client(outbound: httpx2.Proxy | None) -> httpx2.AsyncClient:
    """A client that sends to the provider alone, through `outbound` when there is one."""
    return httpx2.AsyncClient(
        proxy=outbound,
        # No proxy variables, .netrc or redirects: the destination is ours alone.
        trust_env=False,
        follow_redirects=False,
        timeout=UPSTREAM_TIMEOUT,
        limits=httpx2.Limits(max_connections=None, keepalive_expiry=30.0),
    )


class UpstreamClient:
    """The one client that sends to the provider, made by `make` in a thread when wanted."""

    def __init__(self, make: Callable[[], httpx2.AsyncClient]) -> None:
        self._make = make
        self._client: asyncio.Future[httpx2.AsyncClient] | None = None

    def prepare(self) -> asyncio.Future[httpx2.AsyncClient]:
        """Begin making the client, in a thread, if it is not made yet."""
        if self._client is None:
            self._client = asyncio.ensure_future(asyncio.to_thread(self._make))
        return self._client

    async def get(self) -> httpx2.AsyncClient:
        return await self.prepare()

    async def close(self) -> None:
        """Release the client, if one was asked for."""
        if self._client is not None:
            # A client that could not be made (its failure was each request's) has nothing
            # to release.
            (client,) = await asyncio.gather(self._client, return_exceptions=True)
            if isinstance(client, httpx2.AsyncClient):
                await client.aclose()
