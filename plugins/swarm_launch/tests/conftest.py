"""The swarm launcher's tests: one swarm of docker-in-docker nodes for the session, with the
clone image pushed to its registry and pulled on every node once (a first pull of it takes
longer than any clone's wait)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from shadowclone_testing.containers import IMAGE, clone_image, docker_client
from shadowclone_testing.swarm import Swarm

from shadowclone_swarm_launch.images import Images


@pytest.fixture(scope="session")
def sc_swarm_image(sc_swarm: Swarm) -> Iterator[str]:
    """The clone image by digest in the swarm's registry, on the workers; the manager
    drained, so that clones run on the workers."""
    client = docker_client()
    clone_image(client)
    reference = Images(client, sc_swarm.registry).reference(IMAGE)
    sc_swarm.ready_for_clones(reference)
    yield reference
