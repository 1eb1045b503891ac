"""The dashboard's sessions: one per login, kept in the dashboard's memory only.

A session is made by a login (a one-time login code, or the token posted in the login form)
and is named by a random cookie; it has a CSRF value of its own for its forms. It ends when
it has been idle too long, when it is too old whatever its use, and when its owner logs out;
a restart of the dashboard ends them all.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable

import attrs

IDLE_S = 2 * 3600.0
"""A session that made no request for this long has ended."""
ABSOLUTE_S = 12 * 3600.0
"""A session this old has ended, however busy."""


def _key(cookie: str) -> str:
    return hashlib.sha256(cookie.encode("utf-8", "surrogateescape")).hexdigest()


@attrs.define
class Session:
    key: str
    """The hash of its cookie (the cookie itself is kept nowhere)."""
    csrf: str
    created: float
    seen: float
    flash: list[tuple[str, str]] = attrs.field(factory=list)
    """Lines for the next page it shows: (kind, text), each its own words."""
    ended: bool = False


class Sessions:
    def __init__(
        self,
        clock: Callable[[], float],
        idle_s: float = IDLE_S,
        absolute_s: float = ABSOLUTE_S,
    ) -> None:
        self.clock = clock
        self.idle_s = idle_s
        self.absolute_s = absolute_s
        self._by_key: dict[str, Session] = {}

    def open(self) -> tuple[str, Session]:
        """A new session, and the cookie that names it."""
        self._prune()
        cookie = secrets.token_urlsafe(32)
        now = self.clock()
        session = Session(_key(cookie), secrets.token_urlsafe(32), now, now)
        self._by_key[session.key] = session
        return cookie, session

    def find(self, cookie: str, touch: bool = True) -> Session | None:
        """The live session `cookie` names; `touch`: the request counts as its use."""
        session = self._by_key.get(_key(cookie)) if cookie else None
        if session is None or not self.alive(session):
            return None
        if touch:
            session.seen = self.clock()
        return session

    def alive(self, session: Session) -> bool:
        now = self.clock()
        expired = now - session.seen > self.idle_s or now - session.created > self.absolute_s
        if expired or session.ended:
            self.end(session)
            return False
        return True

    def end(self, session: Session) -> None:
        session.ended = True
        self._by_key.pop(session.key, None)

    def _prune(self) -> None:
        for session in list(self._by_key.values()):
            self.alive(session)
