"""The ChatGPT plan login: the proxy holds its tokens and alone refreshes them.

A ChatGPT plan login is the `auth.json` that `codex login` writes: an access token that expires
and a refresh token the token endpoint accepts once, answering with a new one. Whoever spends
the refresh token must keep the new one, or the login is lost. So the engine gets an `auth.json`
of placeholders (`engine_auth_json`), the model proxy sets the real access token on each
request, and when the provider answers 401, or the access token is about to expire, the proxy
refreshes it and writes the rotated tokens to the login's state folder. That folder outlives
the clone (the launcher mounts it into every clone of this login, one at a time), and the next
clone starts from it, not from the spent token the owner pasted. Host code never opens it.

The state remembers which pasted `auth.json` it grew from; when the owner pastes a new one
(after `codex login` again), the state from the old one is set aside.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

from shadowclone import files
from shadowclone.proxy.credentials import PLACEHOLDER_PREFIX, LoginError

log = logging.getLogger(__name__)

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
"""Codex's public OAuth client id, which its refresh tokens are bound to."""
TOKEN_URL = "https://auth.openai.com/oauth/token"
STATE_FILE = "chatgpt-login.json"
LOCK_FILE = "chatgpt-login.lock"
EXPIRY_MARGIN_S = 120.0
"""An access token this close to its expiry is refreshed before it is used."""
REFRESH_TIMEOUT_S = 30.0
LOCK_TIMEOUT_S = 60.0
PLACEHOLDER_ACCESS = PLACEHOLDER_PREFIX + "chatgpt-access-token"
PLACEHOLDER_REFRESH = PLACEHOLDER_PREFIX + "chatgpt-refresh-token"
PLACEHOLDER_ACCOUNT = PLACEHOLDER_PREFIX + "chatgpt-account"
AUTH_CLAIMS = "https://api.openai.com/auth"
EXPIRED_HELP = (
    "the ChatGPT plan login can no longer refresh its token (it expired, or its refresh token "
    "was spent elsewhere): run `codex login` with a CODEX_HOME used only for shadowclone and "
    "paste the new auth.json into the secrets file"
)

NO_STATE_HELP = (
    "the ChatGPT plan login's access token expired, and this clone has no login state folder "
    "to keep a refreshed token in (its launcher gives none), so it does not refresh"
)


def _claims(jwt: str) -> dict[str, Any]:
    """The payload of a JWT, unverified (only to read claims), or {} if it is not one."""
    parts = jwt.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return payload if isinstance(payload, dict) else {}


def _segment(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _now_stamp() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def parse_auth(text: str) -> dict[str, Any]:
    """A pasted `auth.json`, checked for what the proxy needs."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise LoginError(f"codex_auth_json in the secrets file is not JSON: {error}") from None
    tokens = document.get("tokens") if isinstance(document, dict) else None
    if not isinstance(tokens, dict):
        raise LoginError("codex_auth_json in the secrets file has no tokens (run `codex login`)")
    for key in ("access_token", "refresh_token"):
        value = tokens.get(key)
        if not isinstance(value, str) or not value:
            raise LoginError(f"codex_auth_json in the secrets file has no tokens.{key}")
        if value.startswith(PLACEHOLDER_PREFIX):
            raise LoginError(f"tokens.{key} in codex_auth_json is a placeholder, not the login")
    assert isinstance(document, dict)
    return document


def account_id(document: Mapping[str, Any]) -> str:
    tokens = document["tokens"]
    found = tokens.get("account_id") or _claims(str(tokens.get("id_token", ""))).get(
        AUTH_CLAIMS, {}
    ).get("chatgpt_account_id")
    if not isinstance(found, str) or not found:
        raise LoginError("codex_auth_json in the secrets file names no ChatGPT account")
    return found


def engine_auth_json(document: Mapping[str, Any]) -> str:
    """The `auth.json` the engine gets: the login's shape, the plan and email claims Codex
    reads, and a placeholder wherever a token or the account id goes."""
    real = _claims(str(document["tokens"].get("id_token", "")))
    plan = real.get(AUTH_CLAIMS, {}).get("chatgpt_plan_type") if real else None
    claims: dict[str, Any] = {
        "email": real.get("email", "owner@example.invalid"),
        AUTH_CLAIMS: {
            "chatgpt_plan_type": plan or "plus",
            "chatgpt_account_id": PLACEHOLDER_ACCOUNT,
        },
    }
    id_token = f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}.placeholder"
    placeholder = {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": id_token,
            "access_token": PLACEHOLDER_ACCESS,
            "refresh_token": PLACEHOLDER_REFRESH,
            "account_id": PLACEHOLDER_ACCOUNT,
        },
        # Fresh, so Codex never tries to refresh the placeholders itself.
        "last_refresh": _now_stamp(),
    }
    return json.dumps(placeholder, indent=2)


class ChatgptCredential:
    """The `Credential` of a ChatGPT plan login (see the module's docstring)."""

    def __init__(
        self,
        pasted: str,
        *,
        state_dir: Path | None,
        token_url: str = TOKEN_URL,
        outbound_proxy: str | None = None,
    ) -> None:
        self._origin = hashlib.sha256(pasted.encode()).hexdigest()
        self._auth = parse_auth(pasted)
        self.account_id = account_id(self._auth)
        self.token_url = token_url
        self._outbound_proxy = outbound_proxy
        self._state = state_dir / STATE_FILE if state_dir is not None else None
        self._file_lock = (
            files.FileLock(state_dir / LOCK_FILE, timeout=LOCK_TIMEOUT_S, mode=0o600)
            if state_dir is not None
            else None
        )
        if state_dir is not None and not os.access(state_dir, os.W_OK | os.X_OK):
            raise LoginError(f"{state_dir}: the ChatGPT plan login's state folder is not writable")
        self._lock = asyncio.Lock()
        self.problem: str | None = None
        """Why the login stopped working, for the clone's report; None while it works."""
        self._adopt_state()

    def engine_auth_json(self) -> str:
        return engine_auth_json(self._auth)

    @property
    def _access(self) -> str:
        return str(self._auth["tokens"]["access_token"])

    def _adopt_state(self) -> bool:
        """Take the tokens of the state folder if they grew from the same pasted login and
        differ from ours; say whether they did."""
        if self._state is None:
            return False
        try:
            saved = json.loads(self._state.read_text(encoding="utf-8"))
            auth = parse_auth(json.dumps(saved["auth"]))
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, TypeError, LoginError) as error:
            log.warning("%s is unreadable, starting from the pasted login: %s", self._state, error)
            return False
        if saved.get("origin") != self._origin:
            log.info("the pasted ChatGPT login is new: the state of the older one is set aside")
            return False
        if auth["tokens"]["access_token"] == self._access:
            return False
        self._auth = auth
        return True

    def _save_state(self) -> None:
        if self._state is not None:
            data = json.dumps({"origin": self._origin, "auth": self._auth}, indent=2)
            files.write_atomic(self._state, data.encode(), mode=0o600)

    async def headers(self) -> Mapping[str, str]:
        expires = _claims(self._access).get("exp")
        if isinstance(expires, int | float) and expires < time.time() + EXPIRY_MARGIN_S:
            await self._refresh(self._access)
        return {"authorization": f"Bearer {self._access}", "chatgpt-account-id": self.account_id}

    async def refreshed(self, failed: Mapping[str, str]) -> bool:
        return await self._refresh(failed.get("authorization", "").removeprefix("Bearer "))

    async def _refresh(self, failed_access: str) -> bool:
        """Renew the access token that `failed_access` was, once for every request that saw
        it fail; True when a newer one is at hand."""
        async with self._lock:
            if self._access != failed_access:
                return True  # another request renewed it meanwhile
            if self._file_lock is None:
                # The rotated refresh token would die with this clone, and the owner's with it.
                self.problem = NO_STATE_HELP
                return False
            lock = self._file_lock
            await asyncio.to_thread(lock.__enter__)
            try:
                if await asyncio.to_thread(self._adopt_state):
                    return True  # a clone before this one renewed it
                return await self._ask_token_endpoint()
            finally:
                lock.__exit__(None, None, None)

    async def _ask_token_endpoint(self) -> bool:
        tokens = self._auth["tokens"]
        body = {
            "client_id": CLIENT_ID,
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "scope": "openid profile email",
        }
        try:
            async with httpx2.AsyncClient(
                proxy=self._outbound_proxy, trust_env=False, timeout=REFRESH_TIMEOUT_S
            ) as client:
                response = await client.post(self.token_url, json=body)
            answer = response.json() if response.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as error:
            log.warning("the ChatGPT token endpoint could not be reached: %s", type(error).__name__)
            return False
        if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
            log.warning("the ChatGPT token endpoint refused the refresh (%s)", response.status_code)
            self.problem = EXPIRED_HELP
            return False
        renewed = {**tokens, "access_token": answer["access_token"]}
        for key in ("id_token", "refresh_token"):
            if isinstance(answer.get(key), str) and answer[key]:
                renewed[key] = answer[key]
        self._auth = {**self._auth, "tokens": renewed, "last_refresh": _now_stamp()}
        await asyncio.to_thread(self._save_state)
        log.info("the ChatGPT plan login refreshed its access token")
        self.problem = None
        return True

    def __repr__(self) -> str:  # never a token: a repr ends up in logs
        return f"ChatgptCredential(account={self.account_id!r}, state={self._state})"
