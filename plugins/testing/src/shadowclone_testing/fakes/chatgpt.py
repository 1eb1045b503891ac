"""A fake ChatGPT plan login: the OAuth token endpoint and the access check of its API.

A ChatGPT plan login is a Codex `auth.json`: an access token that expires and a refresh token
that works once (each refresh returns a new one; the old one is then refused, as the real
endpoint does). The fake model server takes one of these (`FakeModelServer(login=...)`): it
then answers model requests only with a current access token and the account's id, and serves
the token endpoint at `TOKEN_PATH`, so a test can expire the access token at any moment and see
who refreshed it, with which refresh token, and what a second refresh with a spent token gets.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import attrs

TOKEN_PATH = "/oauth/token"
ACCOUNT_ID = "acct-fake-0001"


def _segment(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsigned_jwt(claims: Mapping[str, Any]) -> str:
    """A JWT Codex can read the claims of; nobody checks its signature here."""
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}.fake-signature"


@attrs.frozen
class Refresh:
    """One call of the token endpoint."""

    refresh_token: str
    accepted: bool


class FakeChatgptLogin:
    """The server side of one ChatGPT plan account."""

    def __init__(self, email: str = "owner@example.com") -> None:
        self.email = email
        self._lock = threading.Lock()
        self._serial = itertools.count(1)
        self._access: set[str] = set()
        self._last_access = ""
        self._refresh: str = ""
        self._spent: set[str] = set()
        self.refreshes: list[Refresh] = []
        self.seen_access: list[str] = []
        """Every access token a model request carried, valid or not."""
        self._issue()

    def _issue(self) -> dict[str, str]:
        number = next(self._serial)
        access, refresh = f"fake-access-{number:04d}", f"fake-refresh-{number:04d}"
        self._access = {access}
        self._last_access = access
        if self._refresh:
            self._spent.add(self._refresh)
        self._refresh = refresh
        return {"id_token": self.id_token(), "access_token": access, "refresh_token": refresh}

    def id_token(self) -> str:
        return unsigned_jwt(
            {
                "email": self.email,
                "https://api.openai.com/auth": {
                    "chatgpt_plan_type": "plus",
                    "chatgpt_account_id": ACCOUNT_ID,
                },
            }
        )

    def auth_json(self) -> str:
        """What `codex login` would have written now: the owner pastes it into the secrets."""
        with self._lock:
            tokens = {
                "id_token": self.id_token(),
                "access_token": self._last_access,
                "refresh_token": self._refresh,
                "account_id": ACCOUNT_ID,
            }
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        document = {"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "tokens": tokens}
        return json.dumps({**document, "last_refresh": stamp}, indent=2)

    @property
    def refresh_token(self) -> str:
        """The one refresh token the endpoint takes now."""
        with self._lock:
            return self._refresh

    @property
    def access_tokens(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._access)

    def expire(self) -> None:
        """Every access token issued so far stops working (the next request gets 401)."""
        with self._lock:
            self._access = set()

    def accepts(self, headers: Mapping[str, str]) -> bool:
        """Whether a model request with these (lower-case) headers is let in."""
        authorization = headers.get("authorization", "")
        token = authorization.removeprefix("Bearer ")
        with self._lock:
            self.seen_access.append(token)
            return token in self._access and headers.get("chatgpt-account-id") == ACCOUNT_ID

    def token_endpoint(self, body: object) -> tuple[HTTPStatus, dict[str, Any]]:
        """Answer one POST to the token endpoint."""
        if not isinstance(body, Mapping) or body.get("grant_type") != "refresh_token":
            return HTTPStatus.BAD_REQUEST, {"error": "unsupported_grant_type"}
        token = str(body.get("refresh_token", ""))
        with self._lock:
            if token != self._refresh or token in self._spent:
                self.refreshes.append(Refresh(token, accepted=False))
                return HTTPStatus.UNAUTHORIZED, {
                    "error": "invalid_grant",
                    "error_description": "refresh token already used or unknown",
                }
            self.refreshes.append(Refresh(token, accepted=True))
            return HTTPStatus.OK, self._issue()
