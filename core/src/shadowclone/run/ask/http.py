"""The ask server served over streamable HTTP from the run program's own process.

Both engines wait for their MCP servers before their first model request, so whatever the ask
server costs at start is the clone's start. Started stdio-wise by the engine it cost a Python
process and the MCP SDK's import (about a second); served from the run program on the SDK, the
SDK's import (a third of a second of CPU, most of it building its pydantic models) still stood
between the engine and its first request. This server does without the SDK: one tool, four
JSON-RPC methods (initialize, ping, tools/list, tools/call) in the stateless form of the
streamable HTTP transport, on asyncio and h11 (which frames HTTP/1.1 and bounds a request's
head). It is up the moment the run program starts; its conformance is tested with the SDK's
own client and with both real engines.

It listens on 127.0.0.1 with a port of its own, and every request must carry the clone's bearer
token (a loopback port is reachable by anyone on the machine where the fake launcher runs
clones). It runs as the run program, so its lines go straight to the run folder's progress,
masked with every secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import secrets
import socket
from collections.abc import Iterator, Mapping
from typing import Any, Final

import h11

from shadowclone import __version__, httpio
from shadowclone.node.runfolder import RunFolder
from shadowclone.run.ask import SERVER_NAME, TOOL_NAME
from shadowclone.run.ask.tool import (
    ANNOTATIONS,
    INPUT_SCHEMA,
    INSTRUCTIONS,
    TITLE,
    AskTool,
    Refused,
    ServedTool,
    description,
)
from shadowclone.run.inbox import POLL_S
from shadowclone.run.progress import Redact

log = logging.getLogger(__name__)

PATH = "/mcp"
BACKLOG = 64
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 1024 * 1024
"""A question is a few hundred bytes: a larger request is refused (413)."""
IDLE_TIMEOUT_S = 600.0
"""A connection with no request for this long is closed (an engine reconnects at will)."""

PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The MCP revisions whose stateless streamable HTTP form this server speaks; a client asking
for another is offered the latest (and may then decline)."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
REQUEST_CANCELLED = -32800


class AskService:
    """The `shadowclone_ask` server of one clone, on 127.0.0.1 (see the module's docstring)."""

    def __init__(
        self, folder: RunFolder, redact: Redact, timeout_s: float, poll_s: float = POLL_S
    ) -> None:
        self.tool = AskTool(folder, redact, timeout_s, poll_s)
        self.timeout_s = timeout_s
        self.token = secrets.token_urlsafe(32)
        self.url = ""
        self._listener: socket.socket | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._calls: dict[str, asyncio.Future[dict[str, Any]]] = {}
        """Calls under way, by request id: a client's `notifications/cancelled` names one."""
        self.extras: dict[str, ServedTool] = {}
        """The run program's other tools beside `ask` (run/ask/tools.py), listed from the
        start: an engine started early lists the tools once."""

    def add_tool(self, tool: ServedTool) -> None:
        self.extras[tool.name] = tool

    @property
    def headers(self) -> dict[str, str]:
        """What an MCP client sends with every request."""
        return {"Authorization": f"Bearer {self.token}"}

    def listen(self) -> str:
        """Bind a free loopback port and listen on it, and say its URL: a client connecting
        before `start` waits in the listen queue."""
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(BACKLOG)
            self._listener = listener
            self.url = f"http://127.0.0.1:{listener.getsockname()[1]}{PATH}"
        return self.url

    async def start(self) -> None:
        """Serve on the listening socket until `close`."""
        self.listen()
        if self._server is None:
            self._server = await asyncio.start_server(
                self._accept, sock=self._listener, backlog=BACKLOG
            )
            log.info("the ask server serves %s", self.url)

    async def close(self) -> None:
        """Stop serving; a call still waiting for the owner is withdrawn."""
        if self._server is not None:
            self._server.close()
        elif self._listener is not None:
            self._listener.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        httpio.send_at_once(writer)
        try:
            await _Connection(self, reader, writer).serve()
        except (ConnectionError, h11.ProtocolError, TimeoutError) as error:
            log.debug("an ask connection ended: %r", error)
        finally:
            self._connections.discard(task)
            writer.close()

    def initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    def tools(self) -> dict[str, Any]:
        ask = {
            "name": TOOL_NAME,
            "title": TITLE,
            "description": description(self.timeout_s),
            "inputSchema": INPUT_SCHEMA,
            "annotations": ANNOTATIONS,
        }
        return {"tools": [ask, *(tool.listing() for tool in self.extras.values())]}

    def cancel(self, params: Mapping[str, Any]) -> None:
        call = self._calls.get(json.dumps(params.get("requestId")))
        if call is not None:
            call.cancel()

    @contextlib.contextmanager
    def calling(self, ident: Any, params: Mapping[str, Any]) -> Iterator[asyncio.Future[Any]]:
        """The call of request `ident`, known by its id while it runs."""
        key = json.dumps(ident)
        call = self._calls[key] = asyncio.ensure_future(self.call(params))
        try:
            yield call
        finally:
            if self._calls.get(key) is call:
                del self._calls[key]

    async def call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        extra = self.extras.get(name) if isinstance(name, str) else None
        if name != TOOL_NAME and extra is None:
            raise _RpcError(INVALID_PARAMS, f"unknown tool {name!r}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise _RpcError(INVALID_PARAMS, "arguments must be an object")
        try:
            if extra is not None:
                said, failed = await extra.call(arguments), False
            else:
                said, failed = await self.tool.call(arguments), False
        except Refused as refused:
            said, failed = str(refused), True
        return {"content": [{"type": "text", "text": said}], "isError": failed}


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Connection:
    """One client connection: requests one after another (keep-alive)."""

    def __init__(
        self, service: AskService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.expected = f"Bearer {service.token}".encode()

    async def serve(self) -> None:
        while True:
            try:
                async with asyncio.timeout(IDLE_TIMEOUT_S):
                    event = await self._next()
            except h11.RemoteProtocolError as error:
                await self._reply(error.error_status_hint, b"malformed request\n", close=True)
                return
            if not isinstance(event, h11.Request) or not await self._exchange(event):
                return
            try:
                self.http.start_next_cycle()
            except h11.LocalProtocolError:
                return  # answered before the request was read whole: the connection closes

    async def _next(self) -> h11.Event | type[h11.PAUSED]:
        return await httpio.next_event(self.http, self.reader)

    async def _exchange(self, request: h11.Request) -> bool:
        """Answer one request; False when the connection must close after it."""
        headers = dict(request.headers)
        if request.target.split(b"?", 1)[0] != PATH.encode():
            return await self._reply(404, b"not found\n", close=True)
        if not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
            return await self._reply(401, b"no or a wrong token\n", close=True)
        body = bytearray()
        while isinstance(event := await self._next(), h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                return await self._reply(413, b"request too large\n", close=True)
        if not isinstance(event, h11.EndOfMessage):
            return False
        if request.method != b"POST":
            # The stateless transport has no stream of the server's own (GET) and no session
            # to end (DELETE).
            return await self._reply(405, b"method not allowed\n", [(b"allow", b"POST")])
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return await self._rpc(headers, _error(None, PARSE_ERROR, "the body is not JSON"))
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            refused = _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
            return await self._rpc(headers, refused)
        if "id" not in message or "method" not in message:
            # A notification, or a response to nothing: accepted, with no answer.
            if message.get("method") == "notifications/cancelled":
                self.service.cancel(message.get("params") or {})
            return await self._reply(202, b"", [])
        return await self._rpc(headers, await self._answer(message))

    async def _answer(self, message: Mapping[str, Any]) -> dict[str, Any]:
        ident, method = message["id"], message["method"]
        params = message.get("params") or {}
        try:
            if not isinstance(params, dict):
                raise _RpcError(INVALID_PARAMS, "params must be an object")
            if method == "initialize":
                result = self.service.initialize(params)
            elif method == "ping":
                result = {}
            elif method == "tools/list":
                result = self.service.tools()
            elif method == "tools/call":
                with self.service.calling(ident, params) as call:
                    result = await self._until_hangup(call)
            else:
                raise _RpcError(METHOD_NOT_FOUND, f"no method {str(method)[:100]!r}")
        except _RpcError as error:
            return _error(ident, error.code, str(error))
        return {"jsonrpc": "2.0", "id": ident, "result": result}

    async def _until_hangup(self, answer: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        """`answer`'s result; cancelled (the question withdrawn) if the client cancels the
        call or hangs up first, as an engine does when its turn is interrupted, or the server
        closes."""
        try:
            while True:
                hangup = asyncio.ensure_future(self.reader.read(httpio.READ_SIZE))
                try:
                    await asyncio.wait((answer, hangup), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not hangup.done():
                        hangup.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await hangup
                if hangup.done() and not hangup.cancelled():
                    data = hangup.result()
                    if not data and not answer.done():
                        raise ConnectionResetError("the client hung up while its call waited")
                    self.http.receive_data(data)  # a pipelined next request, or the end
                if answer.cancelled():
                    raise _RpcError(REQUEST_CANCELLED, "the call was cancelled")
                if answer.done():
                    return answer.result()
        finally:
            if not answer.done():
                answer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await answer

    async def _rpc(self, headers: Mapping[bytes, bytes], message: Mapping[str, Any]) -> bool:
        """One JSON-RPC message, as an event stream when the client takes one (as the SDK's
        server answers) or else as JSON."""
        data = json.dumps(message, separators=(",", ":")).encode()
        if b"text/event-stream" in headers.get(b"accept", b""):
            kind, data = b"text/event-stream", b"event: message\r\ndata: " + data + b"\r\n\r\n"
            extra = [(b"cache-control", b"no-cache, no-transform")]
        else:
            kind, extra = b"application/json", []
        return await self._reply(200, data, [(b"content-type", kind), *extra])

    async def _reply(
        self,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
        close: bool = False,
    ) -> bool:
        if self.http.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return False
        fields = [
            (b"content-length", str(len(body)).encode()),
            *(headers or [(b"content-type", b"text/plain; charset=utf-8")]),
        ]
        if close:
            fields.append((b"connection", b"close"))
        # One write: a response split over packets can wait out the client's delayed ACK.
        events = (h11.Response(status_code=status, headers=fields), h11.Data(data=body))
        self.writer.write(
            b"".join(self.http.send(event) or b"" for event in (*events, h11.EndOfMessage()))
        )
        await self.writer.drain()
        if close:
            await self._linger()
        return not close

    async def _linger(self) -> None:
        await httpio.linger(self.reader, self.writer)


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
