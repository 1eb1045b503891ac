"""The HTTP handler of the fake model server: records each request and routes it."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from shadowclone_testing.fakes.chatgpt import TOKEN_PATH
from shadowclone_testing.fakes.modelserver.requests import ModelRequest

if TYPE_CHECKING:
    from shadowclone_testing.fakes.modelserver.server import FakeModelServer

log = logging.getLogger(__name__)


class Handler(BaseHTTPRequestHandler):
    """Records every request on `fake` and routes it: model calls to its script, the login's
    token endpoint, token counts; the rest is not found."""

    fake: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake model server: " + format, *args)

    def send_json(
        self, status: int, data: object, headers: Mapping[str, str] | None = None
    ) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _record(self) -> ModelRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parts = urlsplit(self.path)
        request = ModelRequest(
            index=self.fake._next_index(),
            method=self.command,
            path=parts.path.rstrip("/") or "/",
            query={key: values[-1] for key, values in parse_qs(parts.query).items()},
            headers={key.lower(): value for key, value in self.headers.items()},
            body=body,
        )
        self.fake._record(request)
        return request

    def do_GET(self) -> None:
        request = self._record()
        if request.path == "/v1/models":
            self.send_json(HTTPStatus.OK, {"object": "list", "data": []})
        else:
            self._not_found(request)

    def do_POST(self) -> None:
        request = self._record()
        login = self.fake.login
        refused = (
            login is not None and request.api is not None and not login.accepts(request.headers)
        )
        try:
            if login is not None and request.path == TOKEN_PATH:
                self.send_json(*login.token_endpoint(request.body))
            elif refused:
                error = {"type": "authentication_error", "message": "expired or unknown token"}
                self.send_json(HTTPStatus.UNAUTHORIZED, {"type": "error", "error": error})
            elif request.api is not None and isinstance(request.body, Mapping):
                self.fake.answer(self, request)
            elif request.path == "/v1/messages/count_tokens":
                tokens = max(1, len(json.dumps(request.body)) // 4)
                self.send_json(HTTPStatus.OK, {"input_tokens": tokens})
            elif request.api is not None:
                self.send_json(
                    HTTPStatus.BAD_REQUEST,
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "bad JSON"},
                    },
                )
            else:
                self._not_found(request)
        except (BrokenPipeError, ConnectionResetError):
            # An interrupted turn: the CLI closed the stream mid-reply, as it should.
            log.debug("request %d: client closed the connection mid-reply", request.index)
            self.close_connection = True

    def _not_found(self, request: ModelRequest) -> None:
        self.send_json(
            HTTPStatus.NOT_FOUND,
            {"type": "error", "error": {"type": "not_found_error", "message": request.path}},
        )
