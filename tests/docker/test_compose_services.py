"""A dev container made of Docker Compose services: the clone is the service the configuration
names, the other services start beside it on a network of its own, and end with it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import docker.errors
import pytest
from shadowclone.config import load_config, set_value
from shadowclone.node.schemas import State
from shadowclone.plugin import Outcome, load_registry
from shadowclone.setup import setup_repository
from shadowclone_docker_launch.commands import describe
from shadowclone_docker_launch.services import LABEL_SERVICE_OF
from shadowclone_testing.containers import (
    SETTINGS,
    World,
    issue,
    own_repository,
    script,
    wait_for,
)
from shadowclone_testing.fakes.models import ModelRequest, Shell, Text
from shadowclone_testing.serving import serving

STORE_CHECK = (
    "python3 -c \"import os, urllib.request; body = urllib.request.urlopen(os.environ['STORE_URL'])"
    ".read(); assert b'ok-from-store' in body, body\""
)


def compose_files(image: str) -> dict[str, str]:
    """Two Compose files merged in order: the clone's service (`app`, on the base image, which
    waits for the store to be healthy) and a store service built from a Dockerfile of the
    repository on `image` (it has Python), which serves what it wrote in its volume. The
    store's address comes from the project's `.env`, interpolated with a default."""
    store_dockerfile = f"FROM {image}\nRUN echo ok-from-store > /srv-index.html\n"
    serve = (
        "mkdir -p /data && cp /srv-index.html /data/index.html && "
        "exec python3 -m http.server 8080 --directory /data"
    )
    probe = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/')"
    return {
        ".devcontainer/devcontainer.json": json.dumps(
            {
                "dockerComposeFile": ["compose.yaml", "compose.store.yaml"],
                "service": "app",
                "runServices": ["store"],
                "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
                "postCreateCommand": f"{STORE_CHECK} && echo reached > .store-reached",
            }
        ),
        ".devcontainer/compose.yaml": (
            "services:\n"
            "  app:\n"
            "    image: shadowclone-base:bookworm\n"
            "    volumes: ['..:/workspaces:cached']\n"
            "    command: sleep infinity\n"
            "    environment:\n"
            "      - STORE_URL=http://store:${STORE_PORT:-9999}/\n"
            "    depends_on:\n"
            "      store:\n"
            "        condition: service_healthy\n"
            "  unused:\n"
            "    image: localhost:1/never-pulled:1\n"
        ),
        ".devcontainer/compose.store.yaml": (
            "services:\n"
            "  store:\n"
            "    build:\n"
            "      context: store\n"
            "    user: root\n"
            f"    entrypoint: ['sh', '-c', {json.dumps(serve)}]\n"
            "    volumes: ['store-data:/data']\n"
            "    ports: ['8080:8080']\n"
            "    healthcheck:\n"
            f"      test: ['CMD', 'python3', '-c', {json.dumps(probe)}]\n"
            "      interval: 1s\n"
            "      retries: 60\n"
            "volumes:\n"
            "  store-data:\n"
        ),
        ".devcontainer/.env": "STORE_PORT=8080\n",
        ".devcontainer/store/Dockerfile": store_dockerfile,
    }


@pytest.mark.timeout(1800)
def test_compose_services_start_beside_the_clone_and_end_with_it(world: World, image: str) -> None:
    """Setup reads the Compose files (merged, interpolated from `.env`, `runServices` leaving
    a service out); serve builds the store's image and the clone's; the store starts on the
    clone's own network, healthy before the clone starts; the lifecycle command, the engine's
    shell and the repository's check reach it by its name; once the clone ends, nothing of
    the services is left."""
    world.use("claude")
    repo = own_repository(world)
    world.github.commit(repo, "main", compose_files(image), author="owner")
    authorities = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    set_value(world.paths, "environment.ca_certs", json.dumps([str(a) for a in authorities]))
    config, _ = load_config(world.paths)
    summary = setup_repository(
        config,
        world.paths,
        load_registry(),
        repo,
        engine="claude",
        check_commands=(STORE_CHECK,),
        build=False,
    )
    assert summary.ok, [check for check in summary.checks if not check.passed]
    shown = describe(repo)
    assert shown["compose"]["service"] == "app"
    assert [s["name"] for s in shown["compose"]["services"]] == ["store"]
    assert shown["env"] == {"STORE_URL": "http://store:8080/"}
    tag = shown["tag"]
    number = issue(world, repo, "Use the store")
    seen: list[list[str]] = []

    def services_now(request: ModelRequest) -> None:
        found = world.client.containers.list(filters={"label": LABEL_SERVICE_OF})
        seen.append(sorted(str(c.name) for c in found))

    script(world.model, Shell(f"{STORE_CHECK} && cat .store-reached"), Text("Stored."))
    world.model.rule = services_now  # each request: which services run
    try:
        with serving(world.node, SETTINGS):
            clone_id = world.node.start(f"{repo}#{number}").id
            record = wait_for(
                lambda: (r := world.record(clone_id)) and not r.state.active and r,
                "the clone, its environment built",
                timeout_s=1200,
            )
            world.gone(clone_id)
        assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
        assert record.image == tag
        reached = [r for r in world.model.model_requests() if r.contains("reached")]
        assert reached, world.steps(clone_id)
        assert "review toolchain: passed" in (record.report or ""), record.report
        assert [f"shadowclone-{clone_id}-store"] in seen, seen
    finally:
        # As the environments' tests: the environment image and the store's only; the
        # intermediate -clone image may be the clone image itself under another tag.
        for name in (tag, f"{tag}-service-store"):
            with contextlib.suppress(docker.errors.ImageNotFound):
                world.client.images.remove(name)
