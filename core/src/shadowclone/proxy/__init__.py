"""The model proxy: the engine holds a placeholder, the provider sees the real credential.

The engine (Claude Code, Codex) reads text strangers wrote, so it must never hold a real
credential. It gets a placeholder key (`PLACEHOLDERS`) and a base URL pointing at a
`ModelProxy`, run by the trusted side (the run program, or a sidecar:
`python -m shadowclone.proxy`). The proxy removes the engine's authentication headers, sets
the credential's, forwards only to the configured provider base URL, and streams the answer
back as it arrives.
"""

from __future__ import annotations

from shadowclone.proxy.credentials import (
    ENGINE_AUTH_HEADERS,
    PLACEHOLDERS,
    Credential,
    LoginError,
    StaticCredential,
)
from shadowclone.proxy.logins import PROXIED_LOGINS, credential_for_login, engine_files
from shadowclone.proxy.server import ModelProxy, ProxyError

__all__ = [
    "ENGINE_AUTH_HEADERS",
    "PLACEHOLDERS",
    "PROXIED_LOGINS",
    "Credential",
    "LoginError",
    "ModelProxy",
    "ProxyError",
    "StaticCredential",
    "credential_for_login",
    "engine_files",
]
