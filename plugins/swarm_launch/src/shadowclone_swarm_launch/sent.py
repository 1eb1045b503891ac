"""Run folders that travel (`run_folders = "sent"`): the clone's run folder is a volume of the
node it runs on, which the run program keeps in step with serve's copy through serve's relay
(docs/scale-out.md), so the nodes share no folder with the owner's machine.

The workspace stays in that volume, so each later phase of a clone runs on the node of its
first (a placement constraint, from the node this launcher noted in serve's copy of the run
folder when the phase before ended). A node lost meanwhile fails the clone, as a node lost
under a running clone does.
"""

from __future__ import annotations

from pathlib import Path

import attrs
from docker.models.services import Service
from docker.types import Mount
from shadowclone.plugin import LaunchSpec, Refused, contract
from shadowclone_docker_launch.names import RUN_FOLDER

from shadowclone_swarm_launch.tasks import newest

NODE_FILE = ".swarm-node"
"""In serve's copy of a run folder (never sent): the id of the node that holds the clone's."""


def volume_name(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-run"


def node_of(spec: LaunchSpec) -> str | None:
    """The node that holds the clone's run folder, once a phase of it has run."""
    try:
        return (spec.run_folder / NODE_FILE).read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def checked(spec: LaunchSpec) -> LaunchSpec:
    """The spec as a node can run it: the repository's cache stays on the owner's machine
    (each clone clones from GitHub). A login that keeps renewed tokens in its state folder
    needs that folder, which only a shared clones folder gives."""
    if spec.login_state is not None:
        raise Refused(
            f"clone {spec.clone_id}'s login keeps its renewed tokens in a folder of this "
            'machine, which a node cannot reach with run_folders = "sent": use a login with '
            'an API key, or run_folders = "shared"'
        )
    return attrs.evolve(spec, repo_cache=None)


def mounts(shared: list[Mount], spec: LaunchSpec, labels: dict[str, str]) -> list[Mount]:
    """The shared folders' mounts with the run folder a volume of the node instead."""
    kept = [mount for mount in shared if mount["Target"] != RUN_FOLDER]
    return [
        Mount(RUN_FOLDER, volume_name(spec.clone_id), type="volume", labels=labels),
        *kept,
    ]


def environment(spec: LaunchSpec) -> dict[str, str]:
    assert spec.relay is not None, "serve gives a relaying launcher's specs their relay"
    return {
        contract.RELAY_VARIABLE: spec.relay.url,
        contract.RELAY_CREDENTIAL_VARIABLE: spec.relay.credential,
    }


def constraints(spec: LaunchSpec) -> list[str]:
    node = node_of(spec)
    return [f"node.id=={node}"] if node else []


def note_node(run_folder: Path, service: Service) -> None:
    """Note the node the clone's task ran on, for its later phases (the first noted stays)."""
    path = run_folder / NODE_FILE
    if path.exists() or not run_folder.is_dir():
        return
    task = newest(service)
    node = str((task or {}).get("NodeID") or "")
    if node:
        path.write_text(node + "\n", encoding="utf-8")


def relay_address(spec: LaunchSpec) -> str:
    """host:port of serve's relay, which a network-off clone's egress proxy lets through."""
    assert spec.relay is not None
    return spec.relay.url.removeprefix("http://").rstrip("/")
