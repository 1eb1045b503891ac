"""The dashboard for tests: served on loopback over a node, and a client that logs in."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import attrs
import httpx2
from shadowclone.config import Paths
from shadowclone.node.local import LocalNode

PLANTED = "sk-ant-api03-" + "Q" * 40
"""A key shaped like Anthropic's, planted in a clone's output: no page may show it."""


@attrs.frozen
class Site:
    url: str
    token: str

    def client(self, **options: object) -> httpx2.Client:
        return httpx2.Client(base_url=self.url, timeout=10.0, **options)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def logged_in(self) -> Iterator[httpx2.Client]:
        with self.client(follow_redirects=False) as client:
            response = client.get("/login", params={"token": self.token})
            assert response.status_code == 303
            yield client


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def dashboard(node: LocalNode, home: Paths) -> Iterator[Site]:
    """The dashboard app of `node` on a free loopback port, with its token."""
    import uvicorn
    from shadowclone.dashboard.app import build_app
    from shadowclone.dashboard.keys import load_token

    token, _ = load_token(home)
    port = free_port()
    config = uvicorn.Config(
        build_app(node, token), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the dashboard did not start"
        time.sleep(0.02)
    try:
        yield Site(f"http://127.0.0.1:{port}", token)
    finally:
        server.should_exit = True
        thread.join(10)
