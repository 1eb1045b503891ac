"""The Docker tests: the kit's Docker fixtures, no container or network left behind, and what
Docker says of a test's own clones."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from shadowclone.node.ids import is_clone_id
from shadowclone_docker_launch.launcher import LABEL_SCOPE
from shadowclone_docker_launch.names import CONTAINER_PREFIX
from shadowclone_testing.containers import (  # noqa: F401 - fixtures
    World,
    client,
    host_address,
    image,
    nothing_left_behind,
    production_image,
    world,
)


@pytest.fixture(autouse=True, scope="module")
def _nothing_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every module of Docker tests removes every container and network it made (its homes are
    in the session's temporary folder; other sessions' containers are not counted)."""
    with nothing_left_behind(LABEL_SCOPE, tmp_path_factory.getbasetemp()):
        yield


@pytest.fixture
def clone_networks(world: World) -> Callable[[], dict[str, str]]:  # noqa: F811 - the fixture
    """Asks Docker, when called: the network mode of each running clone container of the test's
    own home (its clones folder's label), by clone id, from the container's name (one made for
    the clone or a spare that took it up). Spares still waiting and model proxies are no clone's
    container; a container another test or an earlier run left carries another label."""
    scope = f"{LABEL_SCOPE}={world.paths.clones_dir.absolute()}"

    def networks() -> dict[str, str]:
        found = world.client.containers.list(filters={"label": scope}, ignore_removed=True)
        modes = {}
        for container in found:
            clone_id = str(container.name or "").removeprefix(CONTAINER_PREFIX)
            if is_clone_id(clone_id):
                modes[clone_id] = str(container.attrs["HostConfig"]["NetworkMode"])
        return modes

    return networks
