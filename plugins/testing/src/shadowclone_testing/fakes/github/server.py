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
import math
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs

from shadowclone_testing.fakes.github import git, openapi, rest
from shadowclone_testing.fakes.github.extras import ExtrasStore, Verdict
from shadowclone_testing.fakes.github.model import ApiError, LoggedRequest

log = logging.getLogger(__name__)

GRAPHQL_PATH = "/api/graphql"
"""GitHub Enterprise's GraphQL beside its REST API at /api/v3."""

ASSETS = "/user-attachments/assets/"
SIGNED = "/_fake/"
"""Where short-lived signed addresses point: `/_fake/logs/JOB` and `/_fake/assets/UUID`."""


class FakeGitHub(ExtrasStore):
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

    def upload_image(self, data: bytes, content_type: str, *, repo: str | None = None) -> str:
        """An image pasted into an issue or comment of `repo`: the URL GitHub gives it. One
        pasted in a private repository is served only to signed-in readers of it."""
        return (
            f"{self.url}/user-attachments/assets/{self.store_attachment(data, content_type, repo)}"
        )


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
            elif path == GRAPHQL_PATH:
                reply = self._graphql(body, user)
            elif path.startswith((ASSETS, SIGNED)):
                reply = self._file(path, query, user)
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
        if path.startswith("/api/"):
            return _json_reply(401, rest.error_body(ApiError(401, "Bad credentials")))
        return _git_error(401, "Invalid username or token.")

    def _rest(self, path: str, query: str, body: bytes, user: str | None) -> git.Reply:
        fake = self.server.fake
        verdict = fake.rate_verdict(user, self.client_address[0])
        if verdict.refusal is not None:
            return _rate_refusal(verdict, self.client_address[0])
        call = rest.Call(
            store=fake,
            web=self._web(),
            viewer=user,
            query=dict(urllib.parse.parse_qsl(query)),
            body=body,
            path=path,
        )
        try:
            with fake.lock:
                status, payload = self.server.router.handle(call, self.command, path)
        except ApiError as e:
            status, payload = e.status, rest.error_body(e)
        reply = _json_reply(status, payload)
        headers = (*reply.headers, *verdict.headers, *call.headers)
        if payload is None:
            return git.Reply(status, tuple(h for h in headers if h[0] != "Content-Type"), b"")
        return attrs.evolve(reply, headers=headers)

    def _web(self) -> str:
        fake = self.server.fake
        return f"http://{self.headers.get('Host') or f'{fake.public_host}:{fake.port}'}"

    def _graphql(self, body: bytes, user: str | None) -> git.Reply:
        fake = self.server.fake
        if self.command != "POST":
            return _json_reply(404, rest.error_body(ApiError(404, "Not Found")))
        if user is None:
            message = "This endpoint requires you to be authenticated."
            return _json_reply(401, {"message": message, "documentation_url": rest.DOCS})
        with fake.lock:
            # Imported here: graphql-core is the tests', not the demo image's (which serves
            # no GraphQL client).
            from shadowclone_testing.fakes.github import graphql_api

            status, payload = graphql_api.execute(fake, self._web(), user, body)
        return _json_reply(status, payload)

    def _file(self, path: str, query: str, user: str | None) -> git.Reply:
        """A pasted image (redirected to a signed address, as GitHub does) or what a signed
        address opens: a job's log or an image."""
        fake = self.server.fake
        not_found = git.Reply(404, (("Content-Type", "text/plain"),), b"Not Found\n")
        if path.startswith(ASSETS):
            name = path.removeprefix(ASSETS)
            found = fake.attachment(name)
            if found is None:
                return not_found
            attachment, _ = found
            with fake.lock:
                repo = fake.state.repo(attachment.repo) if attachment.repo else None
                hidden = repo is not None and repo.private and repo.permission(user) == "none"
            if hidden:
                return not_found
            target = f"{SIGNED}assets/{name}"
            location = f"{self._web()}{target}?token={fake.sign(target)}"
            return git.Reply(302, (("Location", location),), b"")
        token = dict(urllib.parse.parse_qsl(query)).get("token", "")
        if not fake.signed(token, path):
            return git.Reply(403, (("Content-Type", "text/plain"),), b"Request has expired\n")
        kind, _, name = path.removeprefix(SIGNED).partition("/")
        if kind == "assets":
            found = fake.attachment(name)
            if found is None:
                return not_found
            attachment, data = found
            return git.Reply(200, (("Content-Type", attachment.content_type),), data)
        with fake.lock:
            log_text = next(
                (
                    run.log
                    for repo in fake.state.repos.values()
                    for run in repo.check_runs
                    if kind == "logs" and str(run.job_id) == name and run.log is not None
                ),
                None,
            )
        if log_text is None:
            return not_found
        return git.Reply(200, (("Content-Type", "text/plain"),), log_text.encode())

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


def _rate_refusal(verdict: Verdict, client: str) -> git.Reply:
    """GitHub's answer past a rate limit: the primary kind names the user (or address) and
    resets at `x-ratelimit-reset`; the secondary kind says how long to wait in `retry-after`."""
    refusal = verdict.refusal
    assert refusal is not None
    if refusal.kind == "primary":
        who = f"user ID {verdict.user_id}" if verdict.user_id is not None else client
        message = f"API rate limit exceeded for {who}."
        docs = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
        extra: tuple[tuple[str, str], ...] = ()
    else:
        message = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before you "
            "try again."
        )
        docs = (
            "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
            "#about-secondary-rate-limits"
        )
        extra = (("retry-after", str(math.ceil(refusal.seconds))),)
    reply = _json_reply(refusal.status, {"message": message, "documentation_url": docs})
    return attrs.evolve(reply, headers=(*reply.headers, *verdict.headers, *extra))


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
