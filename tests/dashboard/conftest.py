"""A dashboard on loopback over a real node, with serve and the fake launcher beside it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import attrs
import httpx2
import pytest
import uvicorn
from shadowclone.config import Paths
from shadowclone.dashboard.app import build_app
from shadowclone.dashboard.keys import load_token
from shadowclone.node.local import LocalNode

from tests.serve.conftest import ready, scripts

__all__ = ["Site", "ready", "scripts", "site"]


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


@pytest.fixture
def site(node: LocalNode, home: Paths) -> Iterator[Site]:
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
    yield Site(f"http://127.0.0.1:{port}", token)
    server.should_exit = True
    thread.join(10)
