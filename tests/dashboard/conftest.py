"""A dashboard on loopback over a real node, with serve and the fake launcher beside it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from shadowclone.config import Paths
from shadowclone.node.local import LocalNode
from shadowclone_testing.web import Site, dashboard


@pytest.fixture
def site(node: LocalNode, home: Paths) -> Iterator[Site]:
    with dashboard(node, home) as found:
        yield found


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
