"""The dashboard for tests: its app served on loopback by uvicorn, with a clock the test can
move, clients that log in as the owner does (a one-time login link), a free loopback port and
a planted secret."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlencode

import attrs
import httpx2
import uvicorn
from shadowclone.dashboard.app import Dashboard
from shadowclone.dashboard.hosts import HostGate, ServedNames
from shadowclone.dashboard.keys import login_code

PLANTED = "sk-ant-api03-" + "Q" * 40
"""A key shaped like Anthropic's, planted in a clone's output: no page may show it."""


def free_port(preferred: int = 0) -> int:
    """A free port of 127.0.0.1: `preferred` when it is free, else any."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", preferred))
        except OSError:
            probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.define
class Clock:
    """The wall clock, moved on by `later` (sessions' and codes' ages, never sleeps)."""

    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def later(self, seconds: float) -> None:
        self.offset += seconds


@attrs.frozen
class Site:
    url: str
    token: str
    dashboard: Dashboard
    clock: Clock

    def client(self, **options: object) -> httpx2.Client:
        return httpx2.Client(base_url=self.url, timeout=10.0, **options)  # type: ignore[arg-type]

    def login_url(self) -> str:
        """A one-time login link, as `shadowclone dashboard` prints (made at the clock's now)."""
        return f"{self.url}/login?{urlencode({'code': login_code(self.token, self.clock())})}"

    @contextlib.contextmanager
    def logged_in(self) -> Iterator[httpx2.Client]:
        with self.client(follow_redirects=False) as client:
            response = client.get(self.login_url())
            assert response.status_code == 303, response.text
            yield client


@contextlib.contextmanager
def running(server: uvicorn.Server) -> Iterator[str]:
    """`server` on a thread of its own; its address."""
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the dashboard did not start"
        time.sleep(0.02)
    try:
        yield f"http://{server.config.host}:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def served(dashboard: Dashboard, clock: Clock) -> Iterator[Site]:
    """`dashboard` (as build_app wraps it) on a free loopback port."""
    app = HostGate(dashboard.app, ServedNames("127.0.0.1"))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="off"
    )
    with running(uvicorn.Server(config)) as url:
        yield Site(url, dashboard.token, dashboard, clock)
