"""A dashboard on loopback over a real node, with serve and the fake launcher beside it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from shadowclone.config import Paths
from shadowclone.node.local import LocalNode
from shadowclone_testing.web import Site, dashboard


@pytest.fixture
def site(node: LocalNode, home: Paths) -> Iterator[Site]:
    with dashboard(node, home) as found:
        yield found
