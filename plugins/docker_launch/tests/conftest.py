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
def _nothing_left_behind() -> Iterator[None]:
    """Every module of Docker tests removes every container and network it made."""
    with nothing_left_behind(LABEL_SCOPE):
        yield
