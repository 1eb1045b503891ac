"""The `claude` engine: Claude Code driven headlessly in stream-json mode.

Only the registration lives here; the driver is imported when a clone selects this engine.
"""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import Engine, EngineRegistration, hookimpl


def _make_engine() -> Engine:
    from shadowclone_claude.driver import ClaudeEngine

    return ClaudeEngine()


@hookimpl
def shadowclone_engines() -> Iterator[EngineRegistration]:
    yield EngineRegistration(
        name="claude",
        summary="Claude Code (`claude -p`, stream-json); a message interrupts the running turn",
        factory=_make_engine,
        logins=("claude-api-key", "claude-subscription"),
        base_url_env="ANTHROPIC_BASE_URL",
        default_base_url="https://api.anthropic.com",
        credential_files=("claude/.credentials.json",),
    )
