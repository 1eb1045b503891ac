"""The ask server served over streamable HTTP from the run program's own process.

Started stdio-wise by the engine, the server costs the engine's start a Python process and the
MCP SDK's import (about a second) before its first model request, since both engines wait for
their MCP servers. Served from the run program instead, it is up before the engine starts:
the run program starts it beside the target and workspace steps, on 127.0.0.1 with a port of
its own, and every request must carry the clone's bearer token (a loopback port is reachable by
anyone on the machine where the fake launcher runs clones). It runs as the run program, so its
lines go straight to the run folder's progress, masked with every secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from shadowclone.node.runfolder import RunFolder
from shadowclone.run.progress import Redact

log = logging.getLogger(__name__)

PATH = "/mcp"
START_TIMEOUT_S = 30.0
BACKLOG = 64

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _guarded(app: App, token: str) -> App:
    """`app`, answering 401 to any HTTP request without the bearer token."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"no or a wrong token\n"})
                return
        await app(scope, receive, send)

    return guarded


class AskService:
    """The `shadowclone_ask` server of one clone, on 127.0.0.1 (see the module's docstring)."""

    def __init__(self, folder: RunFolder, redact: Redact, timeout_s: float) -> None:
        self.folder = folder
        self.redact = redact
        self.timeout_s = timeout_s
        self.token = secrets.token_urlsafe(32)
        self.url = ""
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._listener: socket.socket | None = None

    @property
    def headers(self) -> dict[str, str]:
        """What an MCP client sends with every request."""
        return {"Authorization": f"Bearer {self.token}"}

    def listen(self) -> str:
        """Bind a free loopback port and listen on it, at once, and say its URL. An engine
        given the URL may connect before the server answers: its connection waits in the
        listen queue while `start` imports the MCP SDK (a third of a second of the run
        program's start, which the engine's own start then overlaps)."""
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(BACKLOG)
            self._listener = listener
            self.url = f"http://127.0.0.1:{listener.getsockname()[1]}{PATH}"
        return self.url

    async def start(self) -> None:
        """Import the MCP SDK and uvicorn (in a thread: the run program's own steps go on)
        and serve on the listening socket until `close`."""
        self.listen()
        try:
            await self._serve()
        except BaseException:
            # An engine already given the URL is refused at once, not left waiting.
            if self._listener is not None:
                self._listener.close()
            raise
        log.info("the ask server serves %s", self.url)

    async def _serve(self) -> None:
        assert self._listener is not None
        server_module, uvicorn = await asyncio.to_thread(_import)
        mcp = server_module.build_server(self.folder, self.redact, self.timeout_s)
        app = mcp.streamable_http_app(streamable_http_path=PATH, stateless_http=True)
        config = uvicorn.Config(
            _guarded(app, self.token),
            log_level="warning",
            lifespan="on",
            access_log=False,
            timeout_graceful_shutdown=1,
            backlog=BACKLOG,
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._listener]))
        async with asyncio.timeout(START_TIMEOUT_S):
            while not self._server.started:
                if self._task.done():
                    self._task.result()  # its error
                    raise RuntimeError("the ask server stopped as it started")
                await asyncio.sleep(0.005)

    async def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 5)
        if self._listener is not None:
            self._listener.close()


def _import() -> tuple[Any, Any]:
    import uvicorn

    from shadowclone.run.ask import server

    return server, uvicorn
