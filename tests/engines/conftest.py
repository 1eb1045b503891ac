"""Fixtures for the engine tests: the pinned CLIs from tools/engines on PATH, asyncio for anyio."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENGINES_BIN = Path(__file__).resolve().parents[2] / "tools" / "engines" / "node_modules" / ".bin"
"""Where `scripts/install-engines` puts the pinned `claude` and `codex`."""


@pytest.fixture
def anyio_backend() -> str:
    """The drivers use asyncio subprocesses."""
    return "asyncio"


@pytest.fixture
def engines_on_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the pinned engine CLIs first on PATH and return their folder.

    A test class names the programs it needs in `engine_binaries` (default: both). When one is
    missing the test is skipped with what to run, except under CI=true, where it fails.
    """
    names: tuple[str, ...] = getattr(request.cls, "engine_binaries", ("claude", "codex"))
    missing = [name for name in names if not (ENGINES_BIN / name).exists()]
    if missing:
        reason = f"{', '.join(missing)} not installed in {ENGINES_BIN}: run scripts/install-engines"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.setenv("PATH", f"{ENGINES_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return ENGINES_BIN
