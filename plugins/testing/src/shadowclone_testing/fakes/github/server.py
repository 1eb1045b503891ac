"""The fake GitHub's HTTP layer: one server on loopback over a `GitHubStore`.

One port serves both GitHub hosts the way GitHub Enterprise does: the REST API under `/api/v3`
(`[github] api_url`, rest.py) and git's smart HTTP at `/{owner}/{repo}.git` (`[github] url`,
git.py).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from shadowclone_testing.fakes.github import git, openapi, rest
from shadowclone_testing.fakes.github.model import ApiError, LoggedRequest
from shadowclone_testing.fakes.github.store import GitHubStore

log = logging.getLogger(__name__)


class FakeGitHub(GitHubStore):
    """GitHub for tests and the demo, keeping its state in `state_dir` across restarts.

    Bind `host="0.0.0.0"` for clients in containers; the URLs in payloads follow the address
    each client used, and `public_host` is the address this object's own URLs use.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        public_host: str | None = None,
    ) -> None:
        super().__init__(state_dir)
        self.host = host
        self.public_host = public_host or ("127.0.0.1" if host in ("0.0.0.0", "") else host)
        self._port = port
        self.latency_s = 0.0
        """How long each request waits before it is handled: a GitHub across the internet (the
        benchmarks' `--github-latency-ms`); none by default."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._openapi: openapi.Description | None = None
        self._openapi_violations: list[str] = []
        self._openapi_lock = threading.Lock()

    # ------------------------------------------------------------------------- lifecycle

    def start(self) -> FakeGitHub:
        self._openapi = openapi.for_new_fake(self)
        server = _Server((self.host, self._port), _Handler)
        server.fake = self
        server.router = rest.Router()
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-github",
            daemon=True,
        )
        self._thread.start()
        log.info("fake GitHub on %s with state in %s", self.url, self.state_dir)
        return self

    def stop(self) -> None:
        """Stop serving, and end open keep-alive connections too, so no client is still
        answered by a stopped server."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def openapi_violations(self) -> list[str]:
        """What in the REST requests and answers so far broke GitHub's OpenAPI description
        (checked in tests only, see openapi.py)."""
        with self._openapi_lock:
            return list(self._openapi_violations)

    def take_openapi_violations(self) -> list[str]:
        """`openapi_violations()`, forgotten once taken: each is reported once."""
        with self._openapi_lock:
            taken, self._openapi_violations = self._openapi_violations, []
            return taken

    def _check_openapi(self, exchange: openapi.Exchange) -> None:
        if self._openapi is None:
            return
        try:
            found = self._openapi.check(exchange)
        except Exception as e:  # a checker that fails must fail the test, not the reply
            log.exception("checking %s %s against OpenAPI failed", exchange.method, exchange.path)
            found = [f"{exchange.method} {exchange.path}: could not be checked: {e!r}"]
        for violation in found:
            log.error("fake GitHub broke GitHub's OpenAPI description: %s", violation)
        with self._openapi_lock:
            self._openapi_violations += found

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake GitHub is not running")
        return self._port

    @property
    def url(self) -> str:
        """The web and git host, as `[github] url`."""
        return f"http://{self.public_host}:{self.port}"

    @property
    def git_url(self) -> str:
        """Where clone URLs start: the same host as `url`, as on GitHub."""
        return self.url

    @property
    def api_url(self) -> str:
        """The REST API, as `[github] api_url`."""
        return self.url + rest.API_PREFIX

    def clone_url(self, full_name: str) -> str:
        return f"{self.git_url}/{full_name}.git"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGitHub
    router: rest.Router

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def close_connections(self) -> None:
        with self.connections_lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):  # the client closed it first
                    connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the second waits for a delayed ACK.
    disable_nagle_algorithm = True
    timeout = 120
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _handle(self) -> None:
        fake = self.server.fake
        body = self._read_body()
        if fake.latency_s > 0:
            time.sleep(fake.latency_s)
        path, _, query = self.path.partition("?")
        token = self._token()
        user = fake._login_for(token) if token else None
        try:
            if token and user is None:
                reply = self._refuse_token(path)
            elif path.endswith((".git/info/refs", ".git/git-upload-pack", ".git/git-receive-pack")):
                reply = self._git(path, query, body, user)
            elif path == rest.API_PREFIX or path.startswith(rest.API_PREFIX + "/"):
                reply = self._rest(path.removeprefix(rest.API_PREFIX), query, body, user)
            else:
                reply = _json_reply(404, rest.error_body(ApiError(404, "Not Found")))
        except Exception as e:  # a bug here is a 500 for the client, as on GitHub
            log.exception("fake GitHub failed on %s %s", self.command, self.path)
            reply = _json_reply(500, rest.error_body(ApiError(500, f"Server Error: {e}")))
        if path == rest.API_PREFIX or path.startswith(rest.API_PREFIX + "/"):
            # Checked before the reply goes out, so a test that has its answer finds it checked.
            fake._check_openapi(
                openapi.Exchange(
                    self.command,
                    path.removeprefix(rest.API_PREFIX),
                    query,
                    dict(self.headers.items()),
                    body,
                    reply.status,
                    reply.headers,
                    reply.body,
                )
            )
        # Logged before the reply goes out, so a client that has its answer finds it logged.
        fake._record(LoggedRequest(self.command, self.path, user, reply.status))
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _token(self) -> str | None:
        """The token from `Authorization: token|Bearer T` or HTTP Basic with T as password."""
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() in ("token", "bearer"):
            return value.strip() or None
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip()).decode()
            except ValueError:
                return None
            return decoded.partition(":")[2] or None
        return None

    def _refuse_token(self, path: str) -> git.Reply:
        if path.startswith(rest.API_PREFIX):
            return _json_reply(401, rest.error_body(ApiError(401, "Bad credentials")))
        return _git_error(401, "Invalid username or token.")

    def _rest(self, path: str, query: str, body: bytes, user: str | None) -> git.Reply:
        fake = self.server.fake
        call = rest.Call(
            store=fake,
            web=f"http://{self.headers.get('Host') or f'{fake.public_host}:{fake.port}'}",
            viewer=user,
            query=dict(urllib.parse.parse_qsl(query)),
            body=body,
        )
        try:
            with fake.lock:
                status, payload = self.server.router.handle(call, self.command, path)
        except ApiError as e:
            status, payload = e.status, rest.error_body(e)
        return _json_reply(status, payload)

    def _git(self, path: str, query: str, body: bytes, user: str | None) -> git.Reply:
        fake = self.server.fake
        full_name, _, rest_of_path = path.lstrip("/").partition(".git/")
        pushing = "git-receive-pack" in (path + query)
        with fake.lock:
            repo = fake.state.repo(full_name)
            if repo is not None:  # GitHub takes any letter case; the bare repository has one
                full_name = repo.full_name
                path = f"/{full_name}.git/{rest_of_path}"
            permission = repo.permission(user) if repo is not None else "none"
            denied = repo is not None and user in repo.push_denied
            protected = list(repo.protected_branches) if repo is not None else []
        if user is None and (pushing or permission == "none"):
            return _git_error(401, "Authentication required.")
        if permission == "none":
            return _git_error(404, "Repository not found.")
        if pushing and (denied or permission not in ("admin", "write")):
            return _git_error(403, f"Permission to {full_name}.git denied to {user}.")
        reply = git.http_backend(
            fake.state_dir / "repos",
            method=self.command,
            path_info=path,
            query=query,
            headers=dict(self.headers.items()),
            body=body,
            remote_user=user,
            protected_branches=protected,
        )
        if pushing and self.command == "POST" and reply.status == 200:
            fake._pushed(full_name)
        return reply


def _git_error(status: int, message: str) -> git.Reply:
    """A refusal git shows the pusher as `remote: MESSAGE` (it prints text/plain bodies)."""
    headers = [("Content-Type", "text/plain; charset=utf-8")]
    if status == 401:
        headers.append(("WWW-Authenticate", 'Basic realm="GitHub"'))
    return git.Reply(status, tuple(headers), (message + "\n").encode())


def _json_reply(status: int, payload: object) -> git.Reply:
    return git.Reply(
        status,
        (("Content-Type", "application/json; charset=utf-8"),),
        json.dumps(payload).encode(),
    )
