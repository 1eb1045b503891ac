"""What the dashboard's tests share: a free loopback port and a planted secret. The dashboard
itself is served for its tests by tests/dashboard/served.py, which logs in as the owner does
(a one-time login link)."""

from __future__ import annotations

import socket

PLANTED = "sk-ant-api03-" + "Q" * 40
"""A key shaped like Anthropic's, planted in a clone's output: no page may show it."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
