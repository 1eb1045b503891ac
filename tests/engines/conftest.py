"""The engine tests share the root conftest's `engines_on_path` and `anyio_backend` fixtures."""

from __future__ import annotations

from tests.conftest import ENGINES_BIN

__all__ = ["ENGINES_BIN"]
