"""The built-in logins as the model proxy serves them: which credential, which engine files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from shadowclone.proxy.chatgpt import TOKEN_URL, ChatgptCredential
from shadowclone.proxy.credentials import (
    OAUTH_BETA,
    Credential,
    LoginError,
    StaticCredential,
    secret_value,
)

PROXIED_LOGINS = frozenset(
    {"claude-api-key", "claude-subscription", "openai-api-key", "chatgpt-plan"}
)
"""The logins the proxy serves: an engine on one of them never holds the credential."""


def credential_for_login(
    login_name: str,
    values: Mapping[str, str],
    *,
    state_dir: Path | None = None,
    token_url: str | None = None,
    outbound_proxy: str | None = None,
) -> Credential:
    """The credential of a built-in login (`shadowclone.providers`), from the secrets values.

    `state_dir` is the login's state folder, which outlives the clone (a ChatGPT plan keeps
    its rotated tokens there); `token_url` where such a login renews its token;
    `outbound_proxy` how the credential reaches it.
    """
    if login_name == "claude-api-key":
        key = secret_value(values, "anthropic_api_key", login_name)
        return StaticCredential({"x-api-key": key})
    if login_name == "claude-subscription":
        token = secret_value(values, "claude_code_oauth_token", login_name)
        return StaticCredential({"authorization": f"Bearer {token}", "anthropic-beta": OAUTH_BETA})
    if login_name == "openai-api-key":
        token = secret_value(values, "openai_api_key", login_name)
        return StaticCredential({"authorization": f"Bearer {token}"})
    if login_name == "chatgpt-plan":
        return ChatgptCredential(
            secret_value(values, "codex_auth_json", login_name),
            state_dir=state_dir,
            token_url=token_url or TOKEN_URL,
            outbound_proxy=outbound_proxy,
        )
    known = "claude-api-key, claude-subscription, openai-api-key, chatgpt-plan"
    raise LoginError(f"the model proxy cannot serve the login {login_name!r} (it serves {known})")


def engine_files(credential: Credential) -> dict[str, str]:
    """Files (by the name of the login's `Secret.file`) the engine gets in place of the real
    ones: a ChatGPT plan's `auth.json` of placeholders."""
    if isinstance(credential, ChatgptCredential):
        return {"auth.json": credential.engine_auth_json()}
    return {}
