"""For every test of this repository: async tests run on asyncio (the run program's loop and
the engine drivers' subprocesses), not on each backend anyio knows; and the testing kit's
fixtures (`sc_home`, `sc_node`, `sc_cli`...), whose pytest plugin loads only where a project
asks for it. pytest takes `pytest_plugins` only from the rootdir's conftest: this one, for
every folder of pyproject.toml's testpaths, the plugins' tests included.

Hypothesis runs without its per-example deadline and its too-slow health check: how fast is a
benchmark's question (bench/), and a loaded machine must not fail a property that holds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "shadowclone", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shadowclone")

# The swarm's fixture once for the whole session: the kit's swarm tests and the swarm launcher's
# share one swarm (named in two conftests, each would make its own).
pytest_plugins = ["shadowclone_testing.pytest_plugin", "shadowclone_testing.swarm"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
