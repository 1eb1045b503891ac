"""Every built-in notifier keeps the notifier contract of the testing kit.

One test class per notifier the built-in plugins register. The HTTP notifiers deliver to a real
server on the loopback interface; the desktop notifier runs a stand-in notify-send on PATH.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from shadowclone.plugin import Family, Notification, NotifierContext, NotifierRegistration
from shadowclone.plugin.manager import load_registry
from shadowclone_testing.suites.notifier import Destination, NotifierContract

REGISTRY = load_registry(entry_points=())
NAMES = REGISTRY.names(Family.NOTIFIER)


@contextmanager
def http_server(working: bool, path: str = "") -> Iterator[Destination]:
    """A loopback server that keeps each POST's body; answers 200, or 500 when not working."""
    bodies: list[str] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if working:
                with lock:
                    bodies.append(body.decode())
            self.send_response(200 if working else 500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    host, port = server.server_address[:2]

    def received() -> list[str]:
        with lock:
            return list(bodies)

    try:
        yield Destination({"url": f"http://{host!s}:{port}{path}"}, received)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def stand_in_notify_send(folder: Path, working: bool) -> Iterator[Destination]:
    """A notify-send on PATH that keeps its arguments, one file per call (or fails)."""
    bin_dir, kept = folder / "bin", folder / "calls"
    bin_dir.mkdir(exist_ok=True)
    kept.mkdir(exist_ok=True)
    program = bin_dir / "notify-send"
    body = f'printf "%s\\n" "$@" > "{kept}/$(date +%s%N)"' if working else "exit 1"
    program.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    program.chmod(0o755)
    before = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{before}"

    def received() -> list[str]:
        return [path.read_text() for path in sorted(kept.iterdir())]

    try:
        yield Destination({}, received)
    finally:
        os.environ["PATH"] = before


DESTINATIONS: dict[str, Callable[[Path, bool], AbstractContextManager[Destination]]] = {
    "webhook": lambda folder, working: http_server(working),
    "ntfy": lambda folder, working: http_server(working, "/contract-topic"),
    "desktop": stand_in_notify_send,
}
"""Where each built-in notifier delivers in a test: a new built-in must say."""


class BuiltinNotifier(NotifierContract):
    notifier_name = ""

    def make_registration(self) -> NotifierRegistration:
        return REGISTRY.notifier(self.notifier_name)

    def destination(self, folder: Path, *, working: bool) -> AbstractContextManager[Destination]:
        return DESTINATIONS[self.notifier_name](folder, working)


def _title(name: str) -> str:
    return "TestNotifier_" + name.replace("-", "_")


for _name in NAMES:
    globals()[_title(_name)] = type(
        _title(_name), (BuiltinNotifier,), {"notifier_name": _name, "__qualname__": _title(_name)}
    )


def test_every_built_in_notifier_has_a_destination_for_the_contract() -> None:
    assert {"desktop", "webhook", "ntfy"} <= set(NAMES)
    assert set(NAMES) == set(DESTINATIONS)


class Leaky:
    """A notifier that breaks the contract: it adds a token to what it delivers."""

    def __init__(self, context: NotifierContext) -> None:
        self.url = str(context.options.get("url", ""))

    def notify(self, notification: Notification) -> None:
        import httpx2

        body = {"title": notification.title, "auth": "Bearer ghp_" + "a1" * 12}
        httpx2.post(self.url, content=json.dumps(body).encode(), timeout=5)


class LeakyNotifier(NotifierContract):
    def make_registration(self) -> NotifierRegistration:
        return NotifierRegistration(name="leaky", summary="breaks", factory=Leaky)

    def destination(self, folder: Path, *, working: bool) -> AbstractContextManager[Destination]:
        return http_server(working)


def test_the_suite_catches_a_notifier_that_breaks_the_contract(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="secret-shaped"):
        LeakyNotifier().test_it_delivers_no_secret_shaped_token_the_notification_lacks()
    with pytest.raises(pytest.fail.Exception):  # a refused delivery passes silently
        LeakyNotifier().test_a_destination_that_refuses_makes_notify_raise(tmp_path)
