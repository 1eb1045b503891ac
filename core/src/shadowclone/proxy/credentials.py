"""Where the real credential comes from, and what the engine gets instead.

The engine reads text strangers wrote, so it holds only a placeholder (`PLACEHOLDERS`); the
proxy removes whatever authentication the engine sent (`ENGINE_AUTH_HEADERS`) and sets the
headers a `Credential` gives it. A credential that can renew itself (the ChatGPT plan login,
whose access token expires) implements `refreshed`; the proxy calls it once when the provider
answers 401 and retries if it returns True.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from shadowclone.errors import BadInput

PLACEHOLDER_PREFIX = "shadowclone-placeholder-"

PLACEHOLDERS: Mapping[str, str] = {
    "anthropic_api_key": PLACEHOLDER_PREFIX + "anthropic-api-key",
    "claude_code_oauth_token": PLACEHOLDER_PREFIX + "claude-code-oauth-token",
    "openai_api_key": PLACEHOLDER_PREFIX + "openai-api-key",
}
"""The value the engine gets in place of each secret (keys as in `shadowclone.providers`).

Clearly fake, so a leaked one is recognisable and worthless. The ChatGPT plan login
(`codex_auth_json`, a whole auth.json) gets a file of placeholders instead (`engine_files`)."""

ENGINE_AUTH_HEADERS: frozenset[str] = frozenset(
    {"x-api-key", "authorization", "proxy-authorization", "chatgpt-account-id", "cookie"}
)
"""Headers the proxy removes from every engine request before it sets the credential's, so a
placeholder (or anything the engine was talked into sending) never reaches the provider."""

LIST_HEADERS: frozenset[str] = frozenset({"anthropic-beta"})
"""Comma-separated headers a credential adds to instead of replacing: the engine's own
betas stay, and the credential's are appended once."""

OAUTH_BETA = "oauth-2025-04-20"
"""The beta the Messages API wants with a Claude subscription (OAuth) token; Claude Code sends
it itself when it holds CLAUDE_CODE_OAUTH_TOKEN, but not when it was given an API key."""


class LoginError(BadInput):
    """A login the proxy cannot serve, or a secrets file without the value it needs."""


@runtime_checkable
class Credential(Protocol):
    """The real credential for one provider, held by the trusted side only."""

    problem: str | None
    """Why the credential stopped working (for the clone's report), or None."""

    async def headers(self) -> Mapping[str, str]:
        """Headers (lower-case names) to set on the next upstream request."""
        ...

    async def refreshed(self, failed: Mapping[str, str]) -> bool:
        """The provider answered 401 to a request sent with `failed` (as `headers()` gave
        them). Renew the credential if it can be renewed, and say whether a retry with fresh
        `headers()` makes sense. Called at most once per request."""
        ...


class StaticCredential:
    """A credential that never changes: an API key or a long-lived token."""

    problem: str | None = None

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = {name.lower(): value for name, value in headers.items()}

    async def headers(self) -> Mapping[str, str]:
        return self._headers

    async def refreshed(self, failed: Mapping[str, str]) -> bool:
        return False

    def __repr__(self) -> str:  # never the values: a repr ends up in logs
        return f"StaticCredential(headers={sorted(self._headers)})"


def secret_value(values: Mapping[str, str], key: str, login: str) -> str:
    value = values.get(key, "").strip()
    if not value:
        raise LoginError(f"the secrets file has no value for {key} (the {login} login)")
    if value.startswith(PLACEHOLDER_PREFIX):
        raise LoginError(f"{key} in the secrets file is a placeholder, not the real value")
    return value
