"""For every test of this repository: async tests run on asyncio (the run program's loop and
the engine drivers' subprocesses), not on each backend anyio knows."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
