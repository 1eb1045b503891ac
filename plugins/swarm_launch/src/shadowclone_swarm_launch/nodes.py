"""The swarm's nodes as the owner sees them (`shadowclone status`, `shadowclone swarm check`):
each with its role, state, clones and what it offers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import docker
import docker.errors
from docker.models.services import Service
from shadowclone.plugin import PluginUnavailable
from shadowclone_docker_launch.scope import unreachable

from shadowclone_swarm_launch.settings import SwarmSettings
from shadowclone_swarm_launch.tasks import RUNNING, hostname, newest


def describe(
    client: docker.DockerClient, services: Sequence[Service], node_lost_s: float
) -> list[tuple[str, bool, str]]:
    """One (name, fine, detail) per node: a node down or not taking clones is not fine."""
    clones: dict[str, int] = {}
    for service in services:
        task = newest(service)
        if task is not None and (task.get("Status") or {}).get("State") in RUNNING:
            node_id = str(task.get("NodeID") or "")
            clones[node_id] = clones.get(node_id, 0) + 1
    try:
        nodes: list[Any] = cast(Any, client.nodes).list()
    except docker.errors.DockerException as error:
        raise unreachable(error) from None
    found = []
    for node in sorted(nodes, key=hostname):
        spec, status = node.attrs.get("Spec") or {}, node.attrs.get("Status") or {}
        resources = (node.attrs.get("Description") or {}).get("Resources") or {}
        state, availability = status.get("State", "unknown"), spec.get("Availability", "")
        cpus = resources.get("NanoCPUs", 0) / 1e9
        memory = resources.get("MemoryBytes", 0) / 2**30
        detail = (
            f"{spec.get('Role', 'node')}, {state}, {availability}: "
            f"{clones.get(str(node.id), 0)} clone(s) running; {cpus:g} CPUs, {memory:.1f} GiB"
        )
        if state == "down":
            detail += f"; a clone on it is ended once it has been down {node_lost_s:.0f} s"
        found.append(
            (f"node {hostname(node)}", state == "ready" and availability == "active", detail)
        )
    return found


def check(client: docker.DockerClient, settings: SwarmSettings, clones_dir: Path) -> None:
    """`PluginUnavailable` with what to do, unless the swarm can run clones: a manager's API,
    and the clones folder shared with the nodes."""
    try:
        info = client.info()
    except docker.errors.DockerException as error:
        raise unreachable(error) from None
    swarm = info.get("Swarm") or {}
    where = settings.manager or "this machine's Docker"
    if swarm.get("LocalNodeState") != "active":
        raise PluginUnavailable(
            f"{where} is in no swarm: run `docker swarm init` there (then `docker swarm "
            "join` on the other machines), or name a manager in [launchers.swarm] manager"
        )
    if not swarm.get("ControlAvailable"):
        raise PluginUnavailable(
            f"{where} is a swarm worker, not a manager: name a manager's Docker in "
            "[launchers.swarm] manager"
        )
    if settings.run_folders is None:
        raise PluginUnavailable(
            "say how the swarm's nodes reach the clones' run folders: [launchers.swarm] "
            'run_folders = "sent" (over the network, to serve at host_address), or "shared" '
            f"(the clones folder {clones_dir} mounted at the same path on every node)"
        )
