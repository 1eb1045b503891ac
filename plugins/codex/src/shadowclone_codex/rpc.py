"""The client side of JSON-RPC 2.0 over the app-server's stdin, one JSON object per line.

Codex leaves `"jsonrpc"` out of what it writes and accepts it on input (docs/engines.md). The
driver's reader hands every response it reads to `Rpc.resolve`; requests from Codex are answered
with `respond` or `refuse`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)
wire = logging.getLogger("shadowclone_codex.wire")
"""Every line to and from the app-server, at DEBUG, with `extra={"direction": "in" | "out"}`."""

INVALID_REQUEST = -32600
"""Codex's code for a request that does not fit the state: "no active turn to steer"..."""


class EngineGone(Exception):
    """The app-server process ended, or its input is closed: no request can be answered."""


class RpcError(Exception):
    """Codex answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {message} (code {code})")
        self.method = method
        self.code = code
        self.message = message


class Rpc:
    """Sends requests and notifications, and pairs responses with the requests they answer."""

    def __init__(self, stdin: asyncio.StreamWriter) -> None:
        self._stdin = stdin
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._write_lock = asyncio.Lock()
        self._gone: str | None = None

    async def request(
        self, method: str, params: Mapping[str, Any], timeout: float | None = None
    ) -> Any:
        """Send a request and return its result; raise `RpcError` for an error response and
        `EngineGone` when the process goes away first."""
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        try:
            await self._write({"id": request_id, "method": method, "params": dict(params)})
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._write(message)

    async def respond(self, request_id: object, result: Mapping[str, Any]) -> None:
        await self._write({"id": request_id, "result": dict(result)})

    async def refuse(self, request_id: object, code: int, message: str) -> None:
        await self._write({"id": request_id, "error": {"code": code, "message": message}})

    def resolve(self, message: Mapping[str, Any]) -> None:
        """Hand a response from Codex to the request waiting for it."""
        request_id = message.get("id")
        entry = self._pending.get(request_id) if isinstance(request_id, int) else None
        if entry is None:
            log.debug("codex answered a request nobody waits for: %.200s", message)
            return
        method, future = entry
        if future.done():
            return
        error = message.get("error")
        if isinstance(error, Mapping):
            code = error.get("code")
            future.set_exception(
                RpcError(
                    method,
                    code if isinstance(code, int) else 0,
                    str(error.get("message", "")),
                )
            )
        else:
            future.set_result(message.get("result"))

    def close(self, reason: str) -> None:
        """No more input: close Codex's stdin (it exits once idle) and fail what still waits."""
        if self._gone is None:
            self._gone = reason
            self._stdin.close()
        self.fail_pending(reason)

    def fail_pending(self, reason: str) -> None:
        """The process is gone: every request still waiting fails with `EngineGone`."""
        if self._gone is None:
            self._gone = reason
        for _method, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(EngineGone(reason))

    async def _write(self, message: Mapping[str, Any]) -> None:
        if self._gone is not None:
            raise EngineGone(self._gone)
        line = json.dumps(message).encode() + b"\n"
        if wire.isEnabledFor(logging.DEBUG):
            wire.debug("%s", line.decode().rstrip("\n"), extra={"direction": "out"})
        async with self._write_lock:
            try:
                self._stdin.write(line)
                await self._stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as error:
                raise EngineGone(f"codex stopped reading its input: {error}") from error
