"""The Docker launcher's tests: the kit's Docker fixtures, nothing left behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from shadowclone_testing.containers import (  # noqa: F401 - fixtures
    client,
    host_address,
    image,
    nothing_left_behind,
    production_image,
    world,
)

from shadowclone_docker_launch.launcher import LABEL_SCOPE


@pytest.fixture(autouse=True, scope="module")
def _nothing_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every module of Docker tests removes every container and network it made (its homes are
    in the session's temporary folder; other sessions' containers are not counted)."""
    with nothing_left_behind(LABEL_SCOPE, tmp_path_factory.getbasetemp()):
        yield
