"""Where the model proxy listens (TCP ports, Unix sockets) and the connections it holds open.

Kept apart from the proxy's forwarding so that starting, addressing and closing the sockets is
one concern: close() ends every open connection quietly, whatever each was doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from shadowclone import httpio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""Serves one connection; the listeners close it after."""


class Listeners:
    """The proxy's servers and the tasks of their open connections."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[object]] = set()
        self.origin: str | None = None
        """The origin the engine reaches the proxy at, once it listens."""
        self._socket: Path | None = None
        self._listening: list[str] = []
        self._closing = False

    async def start_tcp(self, host: str, port: int) -> None:
        """Listen on `host`:`port` (0: any free port); OSError if it cannot."""
        server = await asyncio.start_server(self._on_connection, host, port)
        self._servers.append(server)
        bound = server.sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.origin = f"http://{shown}:{bound}"
        self._listening.append(self.origin)

    async def start_unix(self, path: str | os.PathLike[str]) -> None:
        """Listen on a Unix socket at `path`; OSError if it cannot."""
        socket = Path(path)
        server = await asyncio.start_unix_server(self._on_connection, socket)
        self._servers.append(server)
        self._socket = socket
        self._listening.append(f"unix:{socket}")
        if self.origin is None:
            self.origin = "http://localhost"

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
            await self._handler(reader, writer)
        except asyncio.CancelledError:
            # close() ends the connections; ending quietly keeps asyncio (3.11) from reporting
            # each cancelled connection task as an unhandled error.
            if not self._closing:
                raise
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def stop(self) -> None:
        """Stop listening and end the open connections."""
        self._closing = True
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    def remove_socket(self) -> None:
        """Remove the Unix socket file, if one was made."""
        if self._socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self._socket.unlink()
