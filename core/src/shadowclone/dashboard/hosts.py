"""The names the dashboard answers to, so that a page elsewhere cannot reach it by DNS
rebinding (a name of the attacker's that resolves to 127.0.0.1): a request whose Host header
names anything else is refused before any route sees it."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def host_name(header: str) -> str:
    """The name a Host header gives, without its port, brackets or final dot, lowercased."""
    header = header.strip().lower()
    if header.startswith("["):
        name = header[1 : header.find("]")] if "]" in header else ""
    elif header.count(":") == 1:
        name = header.rsplit(":", 1)[0]
    else:
        name = header
    return name.rstrip(".")


class ServedNames:
    """The dashboard's bind address; for a loopback one, the loopback names too; for a
    wildcard one (0.0.0.0, ::), any address literal and this machine's name; and the host of
    each configured address (`[dashboard] url`)."""

    def __init__(self, bind: str, urls: Iterable[str | None] = ()) -> None:
        bind = host_name(bind)
        self.names = {bind} - WILDCARDS
        self.any_address = bind in WILDCARDS
        address = _ip(bind)
        if bind == "localhost" or (address is not None and address.is_loopback):
            self.names |= LOOPBACK_NAMES
        if self.any_address:
            self.names |= LOOPBACK_NAMES | {socket.gethostname().lower()}
        for url in urls:
            found = urlsplit(url).hostname if url else None
            if found:
                self.names.add(found.rstrip(".").lower())

    def allows(self, header: str) -> bool:
        name = host_name(header)
        if not name:
            return False
        return name in self.names or (self.any_address and _ip(name) is not None)


class HostGate:
    """Refuses, in one line, a request for a name the dashboard does not serve."""

    def __init__(self, app: ASGIApp, served: ServedNames) -> None:
        self.app = app
        self.served = served

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = next((v for k, v in scope["headers"] if k == b"host"), b"")
            if not self.served.allows(header.decode("latin-1")):
                refused = PlainTextResponse(
                    "refused: this dashboard does not serve that host name", status_code=421
                )
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
