"""A dashboard on loopback over a real node, with serve and the fake launcher beside it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from shadowclone.config import Paths
from shadowclone.dashboard.app import Dashboard
from shadowclone.dashboard.keys import load_token
from shadowclone.plugin.node import LocalNode
from shadowclone_testing.web import Clock, Site, served


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def site(sc_node: LocalNode, sc_home: Paths, clock: Clock) -> Iterator[Site]:
    token, _ = load_token(sc_home)
    with served(Dashboard(sc_node, token, clock=clock), clock) as found:
        yield found
