"""What the Docker tests share: a Docker engine and the clone image, or a skip with its reason
(a failure under CI=true), and a check that no test leaves a container or network behind."""

from __future__ import annotations

import os
from collections.abc import Iterator

import docker
import docker.errors
import pytest
from shadowclone.config.schema import DEFAULT_IMAGE, DEMO_IMAGE
from shadowclone_docker_launch.launcher import LABEL_SCOPE

from tests.conftest import skip_or_fail

IMAGE = os.environ.get("SHADOWCLONE_TEST_IMAGE", DEMO_IMAGE)
"""The demo image scripts/build-image builds: the clone image plus the scripted engine, which
most Docker tests play."""
PRODUCTION_IMAGE = os.environ.get("SHADOWCLONE_TEST_PRODUCTION_IMAGE", DEFAULT_IMAGE)
"""The clone image owners run, which the demo image is built on."""


def docker_client() -> docker.DockerClient:
    """The Docker engine, or a skip (outside CI) saying how to get one."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as error:
        skip_or_fail(f"no Docker engine answers ({error}); run scripts/start-docker")
        raise AssertionError("unreachable") from error
    return client


def clone_image(client: docker.DockerClient, name: str = IMAGE) -> str:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        skip_or_fail(f"the image {name} is missing; run scripts/build-image")
    return name


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    return docker_client()


@pytest.fixture(scope="session")
def image(client: docker.DockerClient) -> str:
    return clone_image(client)


@pytest.fixture(scope="session")
def production_image(client: docker.DockerClient) -> str:
    return clone_image(client, PRODUCTION_IMAGE)


def leftovers(client: docker.DockerClient) -> set[str]:
    containers = client.containers.list(all=True, filters={"label": LABEL_SCOPE})
    networks = client.networks.list(filters={"label": LABEL_SCOPE})
    return {f"container {c.name}" for c in containers} | {f"network {n.name}" for n in networks}


@pytest.fixture(autouse=True, scope="module")
def nothing_left_behind() -> Iterator[None]:
    """Every module of Docker tests removes every container and network it made."""
    try:
        client = docker.from_env(timeout=120)
        before = leftovers(client)
    except docker.errors.DockerException:
        yield  # no engine: the tests themselves skip or fail
        return
    yield
    left = leftovers(client) - before
    assert not left, f"left behind by this module: {sorted(left)}"


@pytest.fixture(scope="session")
def host_address(client: docker.DockerClient, image: str) -> str:
    """The host's address where host.docker.internal leads from a container (the default
    bridge's gateway), asked of a container. Test servers listen there only, never on every
    interface."""
    try:
        output = client.containers.run(
            image,
            entrypoint=["getent", "ahostsv4", "host.docker.internal"],
            command=[],
            extra_hosts={"host.docker.internal": "host-gateway"},
            remove=True,
        )
    except docker.errors.ContainerError as error:
        skip_or_fail(f"containers cannot resolve host.docker.internal: {error}")
        raise AssertionError("unreachable") from error
    address = output.decode().split()[0] if output.strip() else ""
    if not address:
        skip_or_fail("Docker gives containers no address of the host (dockerd --bridge=none?)")
    return address
