"""The `codex` engine: the Codex CLI driven through `codex app-server` (JSON-RPC over stdio).

Only the registration lives here; the driver is imported when a clone selects this engine.
"""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import Engine, EngineRegistration, hookimpl


def _make_engine() -> Engine:
    from shadowclone_codex.driver import CodexEngine

    return CodexEngine()


@hookimpl
def shadowclone_engines() -> Iterator[EngineRegistration]:
    yield EngineRegistration(
        name="codex",
        summary="Codex CLI (`codex app-server`, JSON-RPC); a message steers the running turn",
        factory=_make_engine,
        logins=("openai-api-key", "chatgpt-plan"),
        base_url_env="OPENAI_BASE_URL",
        default_base_url="https://api.openai.com/v1",
        credential_files=("codex/auth.json",),
    )
