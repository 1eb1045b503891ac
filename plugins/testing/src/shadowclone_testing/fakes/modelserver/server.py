"""The fake model server: its lifecycle, its script, what it received, and its answers."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import ThreadingHTTPServer

from shadowclone_testing.fakes.chatgpt import TOKEN_PATH, FakeChatgptLogin
from shadowclone_testing.fakes.modelserver.anthropic import AnthropicWriter
from shadowclone_testing.fakes.modelserver.handler import Handler
from shadowclone_testing.fakes.modelserver.refusals import refuse
from shadowclone_testing.fakes.modelserver.replies import (
    ApiError,
    Hang,
    Reply,
    Rule,
    Text,
    UsageLimit,
)
from shadowclone_testing.fakes.modelserver.requests import ModelRequest
from shadowclone_testing.fakes.modelserver.responses import ResponsesWriter
from shadowclone_testing.fakes.modelserver.stream import Stream, ToolNotOffered

log = logging.getLogger(__name__)

FAKE_MODEL = "shadowclone-fake-model"
"""A model name to give an engine that would otherwise pick one whose tools (Codex's default
turns on a JavaScript `exec` around the others) this server does not speak."""
KEEPALIVE_S = 0.5
"""How often a hanging reply writes a keepalive, so it notices a client that went away."""


class FakeModelServer:
    """A real HTTP server on `host` that answers model requests from a script.

    `script` is consumed one reply per model request, in order; `rule`, when given, is asked
    first and may answer a request itself (return a reply) or leave it to the script (None).
    When both have nothing left, the server answers `Text(final_text)`. Use it as a context
    manager, or call `start()` and `close()`.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        rule: Rule | None = None,
        final_text: str = "Done.",
        host: str = "127.0.0.1",
        port: int = 0,
        login: FakeChatgptLogin | None = None,
    ) -> None:
        self._script: list[Reply] = list(script)
        self.login = login
        """When given, model requests need its current access token (else 401), and the server
        is its token endpoint too (`token_url`)."""
        self.rule = rule
        """Asked before the script for each model request; may be set at any time."""
        self.final_text = final_text
        self._host = host
        self._port = port
        self._lock = threading.Condition()
        self._requests: list[ModelRequest] = []
        self._ids = itertools.count(1)
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeModelServer:
        server = self

        class ServerHandler(Handler):
            fake = server

        self._httpd = ThreadingHTTPServer((self._host, self._port), ServerHandler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-model-server",
            daemon=True,
        )
        self._thread.start()
        log.debug("fake model server listening on %s", self.url)
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake model server is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for a client on this machine: the Anthropic base URL (ANTHROPIC_BASE_URL)."""
        return self.url_for("127.0.0.1")

    @property
    def openai_url(self) -> str:
        """Base URL of the Responses API (a Codex provider's `base_url`)."""
        return self.url_for("127.0.0.1") + "/v1"

    def url_for(self, host: str) -> str:
        """Base URL as seen from elsewhere (`host.docker.internal` for a container)."""
        return f"http://{host}:{self.port}"

    @property
    def token_url(self) -> str:
        """The token endpoint of the fake ChatGPT login (`login`)."""
        return self.url + TOKEN_PATH

    # ---- script

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies left in the script."""
        with self._lock:
            return len(self._script)

    def _next_reply(self, request: ModelRequest) -> Reply:
        rule = self.rule
        if rule is not None:
            reply = rule(request)
            if reply is not None:
                return reply
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return Text(self.final_text)

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._ids):04d}"

    # ---- what was received

    def _record(self, request: ModelRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def _next_index(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request received, in order of arrival."""
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[ModelRequest]:
        """The requests that asked a model for a reply (either API)."""
        return [request for request in self.requests if request.api is not None]

    def user_texts(self) -> list[str]:
        """Every distinct user text block the model was sent, in order of first appearance."""
        seen: dict[str, None] = {}
        for request in self.model_requests():
            seen.update(dict.fromkeys(request.user_texts()))
        return list(seen)

    def saw_text(self, text: str) -> bool:
        """True if any model request's conversation contains `text`."""
        return any(request.contains(text) for request in self.model_requests())

    def wait_for(
        self, predicate: Callable[[ModelRequest], bool], timeout: float = 30.0
    ) -> ModelRequest:
        """The first recorded model request that satisfies `predicate`, waiting for it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for request in self._requests:
                    if request.api is not None and predicate(request):
                        return request
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no matching model request within {timeout} s; "
                        f"{len(self._requests)} requests received"
                    )
                self._lock.wait(left)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[ModelRequest]:
        """Wait until at least `count` model requests have arrived; return them all."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(done := [r for r in self._requests if r.api is not None]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(done)} of {count} model requests within {timeout} s")
                self._lock.wait(left)
            return done

    def wait_for_text(self, text: str, timeout: float = 30.0) -> ModelRequest:
        """The first model request whose conversation contains `text`, waiting for it."""
        return self.wait_for(lambda request: request.contains(text), timeout)

    # ---- answering

    def answer(self, handler: Handler, request: ModelRequest) -> None:
        writer: AnthropicWriter | ResponsesWriter
        writer = (
            AnthropicWriter(self, request)
            if request.api == "anthropic"
            else ResponsesWriter(self, request)
        )
        reply = self._next_reply(request)
        log.debug("request %d %s: answering %r", request.index, request.path, reply)
        if isinstance(reply, UsageLimit | ApiError):
            refuse(handler, request, reply)
            return
        final = reply.then if isinstance(reply, Hang) else reply
        try:
            if not request.stream and not isinstance(reply, Hang):
                handler.send_json(HTTPStatus.OK, writer.whole(final))
                return
            # A reply that cannot be rendered (no such tool offered) must fail the request
            # before any byte is sent, as an error the test can read.
            if isinstance(writer, ResponsesWriter):
                writer.items(final)
        except ToolNotOffered as error:
            log.error("request %d: %s", request.index, error)
            handler.send_json(HTTPStatus.BAD_REQUEST, {"error": {"message": str(error)}})
            return
        stream = Stream(handler)
        writer.start(stream)
        if isinstance(reply, Hang):
            while not (reply.released or self._closing.wait(KEEPALIVE_S)):
                writer.keepalive(stream)
        writer.finish(stream, final)
