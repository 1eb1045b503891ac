"""Whole clones in Docker for tests: the Docker engine and the clone images (or a skip with its
reason, a failure under CI=true), the host's address on Docker's bridge, and a `World`: a home
for the Docker launcher with a fake GitHub and a fake model server the containers reach.

A conftest takes the fixtures by importing them: `client`, `image`, `production_image`,
`host_address`, `world`; and wraps a module in `nothing_left_behind(label, under)`."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import docker
import docker.errors
import pytest
from shadowclone.config import HOME_VARIABLE, Paths, default_paths, init_config, set_value
from shadowclone.config.schema import DEFAULT_IMAGE, DEMO_IMAGE
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record
from shadowclone.plugin import Launcher, LauncherSettings, load_registry
from shadowclone.plugin.contract import LABEL_CLONE
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone.serve.loop import ServeSettings

from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FAKE_MODEL, FakeModelServer, ModelRequest, Reply
from shadowclone_testing.harness import set_up, skip_or_fail

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


def find_host_address(client: docker.DockerClient, image: str) -> str:
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


WAIT_S = 240.0
"""Bound on a whole clone in a container: the engine starts, works and the work is saved."""
SETTINGS = ServeSettings(stop_grace_s=20.0, kill_grace_s=10.0, status_poll_s=0.3, rescan_s=1.0)
ANTHROPIC_KEY = "sk-ant-api03-e2e0docker0key0abcdefghijklmnopqrstuvwxyz"
OPENAI_KEY = "sk-proj-e2e0docker0key0abcdefghijklmnopqrstuvwxyz0123"
OAUTH_TOKEN = "sk-ant-oat01-e2e0docker0subscription0abcdefghijklmnopqrstu"
MESSAGE = "Please also add a line saying hi to docker."


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)
    return value


@attrs.define
class World:
    paths: Paths
    github: FakeGitHub
    model: FakeModelServer
    client: docker.DockerClient
    token: str
    host: str
    """The host's address on Docker's bridge, where the fakes listen."""

    @property
    def node(self) -> LocalNode:
        return local_node(self.paths)

    @property
    def launcher(self) -> Launcher:
        """The Docker launcher, through the registry as serve takes it."""
        settings = LauncherSettings(self.paths.clones_dir)
        return load_registry().launcher("docker").factory(settings)

    def use(self, engine: str, login: str | None = None) -> None:
        set_value(self.paths, "engine", f'"{engine}"')
        base_url = self.model.url_for(self.host)
        set_value(
            self.paths,
            f"providers.{engine}.base_url",
            f'"{base_url}/v1"' if engine == "codex" else f'"{base_url}"',
        )
        if engine == "codex":
            # As the engine tests: Codex's default model turns on tools (a JavaScript `exec`
            # around the others) that the fake model server does not speak.
            set_value(self.paths, "providers.codex.model", f'"{FAKE_MODEL}"')
        login = login or ("openai-api-key" if engine == "codex" else "claude-api-key")
        set_value(self.paths, f"providers.{engine}.login", f'"{login}"')
        set_up(self.paths, "owner/app", engine=engine, login=login)

    def issue(self, title: str) -> int:
        number: int = self.github.create_issue("owner/app", author="owner", title=title)
        return number

    def record(self, clone_id: str) -> Record | None:
        return RunFolder(self.paths.clones_dir / clone_id).record()

    def ended(self, clone_id: str) -> Record:
        def done() -> Record | None:
            record = self.record(clone_id)
            return record if record is not None and not record.state.active else None

        found: Record = wait_for(done, f"clone {clone_id} to end")
        return found

    def working(self, clone_id: str, count: int) -> None:
        """Until the model has had `count` requests; a clone that ends first fails the test."""

        def reached() -> bool:
            record = self.record(clone_id)
            if record is not None and not record.state.active:
                pytest.fail(f"clone {clone_id} ended early: {record}\n{self.steps(clone_id)}")
            return len(self.model.model_requests()) >= count

        wait_for(reached, f"{count} model requests")

    def container(self, clone_id: str) -> Any:
        """The clone's container: made for it (labelled with it), or a spare that took it up
        (named after it)."""
        found = self.client.containers.list(
            all=True, filters={"label": f"{LABEL_CLONE}={clone_id}"}, ignore_removed=True
        )
        if found:
            return found[0]
        with contextlib.suppress(docker.errors.NotFound):  # the Docker launcher's name for it
            return self.client.containers.get(f"shadowclone-{clone_id}")
        return None

    def traces(self, clone_id: str) -> list[str]:
        """What Docker still holds of the clone: its container, and the networks and volumes
        whose names carry its id. A container removed while it is listed is gone."""
        client = self.client
        containers = client.containers.list(
            all=True, filters={"name": clone_id}, ignore_removed=True
        )
        found = [c.name for c in containers]
        found += [n.name for n in client.networks.list(filters={"name": clone_id})]
        found += [v.name for v in client.volumes.list(filters={"name": clone_id})]
        return [str(name) for name in found]

    def gone(self, clone_id: str) -> None:
        wait_for(lambda: self.traces(clone_id) == [], f"clone {clone_id}'s container")

    def steps(self, clone_id: str) -> list[str]:
        lines, _, _ = RunFolder(self.paths.clones_dir / clone_id).progress()
        return [line.text for line in lines]


@contextlib.contextmanager
def a_world(
    client: docker.DockerClient, image: str, host_address: str, root: Path
) -> Iterator[World]:
    """owner/app on a fake GitHub and a fake model server on Docker's bridge, and a home under
    `root` (SHADOWCLONE_HOME must name it) for the Docker launcher with the model keys."""
    paths = default_paths({HOME_VARIABLE: str(root / "home")})
    init_config(paths)
    with (
        FakeGitHub(root / "github", host=host_address) as github,
        FakeModelServer([], host=host_address) as model,
    ):
        for key, value in (
            ("launcher", '"docker"'),
            ("image", f'"{image}"'),
            ("daily_clones", "100"),
            ("github.url", f'"{github.url}"'),
            ("github.api_url", f'"{github.api_url}"'),
            ("limits.cpus", "1.5"),
            ("limits.memory", '"2g"'),
        ):
            set_value(paths, key, value)
        token = github.add_user("owner", name="The Owner", email="owner@example.com")
        github.create_repo("owner/app", files={"README.md": "# app\n"})
        paths.secrets_file.write_text(
            f'github_token = "{token}"\nanthropic_api_key = "{ANTHROPIC_KEY}"\n'
            f'openai_api_key = "{OPENAI_KEY}"\nclaude_code_oauth_token = "{OAUTH_TOKEN}"\n'
        )
        paths.secrets_file.chmod(0o600)
        world = World(paths, github, model, client, token, host_address)
        try:
            yield world
        finally:
            launcher = world.launcher
            for status in launcher.running():
                launcher.remove(status.clone_id)


def own_repository(world: World) -> str:
    """A repository of the test's own on the fake GitHub, set up for Claude Code: what Docker
    keeps by repository (its environment's image, its package caches) is the test's alone,
    never another run's of the same test beside it or before it."""
    repo = f"owner/app-{uuid.uuid4().hex[:8]}"
    world.github.create_repo(repo, files={"README.md": "# app\n"})
    set_up(world.paths, repo, engine="claude", login="claude-api-key")
    return repo


def issue(world: World, repo: str, title: str) -> int:
    number: int = world.github.create_issue(repo, author="owner", title=title)
    return number


def script(model: FakeModelServer, *replies: Reply, on_message: Reply | None = None) -> None:
    """The model's replies in order; to the first request that carries MESSAGE, `on_message`
    instead."""
    model.add(*replies)
    if on_message is None:
        return
    answered: list[ModelRequest] = []

    def rule(request: ModelRequest) -> Reply | None:
        if answered or not request.contains(MESSAGE):
            return None
        answered.append(request)
        return on_message

    model.rule = rule


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    return docker_client()


@pytest.fixture(scope="session")
def image(client: docker.DockerClient) -> str:
    return clone_image(client)


@pytest.fixture(scope="session")
def production_image(client: docker.DockerClient) -> str:
    return clone_image(client, PRODUCTION_IMAGE)


def leftovers(client: docker.DockerClient, label: str, under: Path) -> set[str]:
    """The containers and networks that carry `label` with a path in `under` as its value:
    this test session's, never those another session beside it (or an earlier one) made."""

    def ours(labels: dict[str, str] | None) -> bool:
        value = (labels or {}).get(label)
        return value is not None and Path(value).is_relative_to(under)

    found = client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
    networks = client.networks.list(filters={"label": label})
    return {f"container {c.name}" for c in found if ours(c.labels)} | {
        f"network {n.name}" for n in networks if ours(n.attrs.get("Labels"))
    }


@contextlib.contextmanager
def nothing_left_behind(label: str, under: Path) -> Iterator[None]:
    """Fails if the containers and networks that carry `label` with a path in `under` (the
    session's temporary folder, where its homes are) were more at the end."""
    try:
        client = docker.from_env(timeout=120)
        before = leftovers(client, label, under)
    except docker.errors.DockerException:
        yield  # no engine: the tests themselves skip or fail
        return
    yield
    left = leftovers(client, label, under) - before
    assert not left, f"left behind: {sorted(left)}"


@pytest.fixture(scope="session")
def host_address(client: docker.DockerClient, image: str) -> str:
    return find_host_address(client, image)


@pytest.fixture
def world(
    client: docker.DockerClient,
    image: str,
    host_address: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[World]:
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "home"))
    with a_world(client, image, host_address, tmp_path) as found:
        yield found
