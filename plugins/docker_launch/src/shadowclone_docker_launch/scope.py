"""A launcher's containers and volumes on the Docker engine: finding, reading and removing them.

All the launcher makes is labelled with the clones folder it belongs to (its scope), so a
launcher made after a restart of serve finds its clones again, and two shadowclone homes on one
machine never touch each other's clones: every look-up here filters on that label.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container
from docker.models.volumes import Volume
from shadowclone.plugin import CloneStatus, LaunchState, PluginUnavailable

from shadowclone_docker_launch.names import (
    CONTAINER_PREFIX,
    LABEL_CLONE,
    LABEL_EGRESS_OF,
    LABEL_PROXY_OF,
    LABEL_SCOPE,
    LABEL_SPARE,
    SPARE_PREFIX,
    container_name,
    proxy_name,
    volume_name,
)

log = logging.getLogger(__name__)

TAIL_LINES = 40
DOCKER_TIMEOUT_S = 60
STOP_CHECK_S = 10.0

RUNNING_STATES = {"running", "restarting", "paused"}
_EXITED_STATES = {"exited", "dead"}


class DockerScope:
    """The Docker objects of one clones folder, and the client that reaches them (made on
    first use, so a launcher can be made where Docker is not running)."""

    def __init__(self, clones_dir: Path, client: docker.DockerClient | None = None) -> None:
        self.clones_dir = clones_dir
        self.scope = str(clones_dir)
        self._client = client

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = docker.from_env(timeout=DOCKER_TIMEOUT_S)
            except docker.errors.DockerException as error:
                raise unreachable(error) from None
        return self._client

    def container(self, name: str) -> Container | None:
        try:
            container = self.client.containers.get(name)
        except docker.errors.NotFound:
            return None
        except docker.errors.DockerException as error:
            raise unreachable(error) from None
        if container.labels.get(LABEL_SCOPE) != self.scope:
            return None  # another shadowclone home's clone with the same id: not ours
        return container

    def labelled(self, label: str) -> list[Container]:
        try:
            found: list[Container] = self.client.containers.list(
                all=True,
                filters={"label": [label, f"{LABEL_SCOPE}={self.scope}"]},
                ignore_removed=True,  # one removed while listed is left out, not all of them
            )
        except docker.errors.NotFound:
            return []  # a container removed while it was being listed
        except docker.errors.DockerException as error:
            raise unreachable(error) from None
        return found

    def clones(self) -> Iterator[tuple[str, Container]]:
        """Every clone's container in this scope, with its clone's id: those made for it
        (labelled with it) and the spares that took one up (named after it)."""
        for container in self.labelled(LABEL_CLONE):
            yield container.labels.get(LABEL_CLONE, ""), container
        for container in self.labelled(LABEL_SPARE):
            name = str(container.name)
            if not name.startswith(SPARE_PREFIX) and name.startswith(CONTAINER_PREFIX):
                yield name.removeprefix(CONTAINER_PREFIX), container

    def volumes(self) -> Iterator[Volume]:
        found: list[Volume] = self.client.volumes.list(
            filters={"label": [LABEL_EGRESS_OF, f"{LABEL_SCOPE}={self.scope}"]}
        )
        yield from found

    def volume(self, name: str) -> Volume | None:
        try:
            volume = self.client.volumes.get(name)
        except docker.errors.NotFound:
            return None
        if (volume.attrs.get("Labels") or {}).get(LABEL_SCOPE) != self.scope:
            return None
        return volume

    def remove_containers(self, names: Sequence[str]) -> None:
        for name in names:
            container = self.container(name)
            if container is not None:
                remove_container(container)

    def remove_all(self, clone_id: str, keep_clone: bool = False) -> None:
        """A clone's container (unless `keep_clone`), its egress proxy and the proxy's volume."""
        names = [proxy_name(clone_id)] if keep_clone else [container_name(clone_id)]
        if not keep_clone:
            names.append(proxy_name(clone_id))
        self.remove_containers(names)
        volume = self.volume(volume_name(clone_id))
        if volume is not None:
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)

    def reap_strays(self) -> list[str]:
        """Remove containers of clones whose run folder is gone, containers created but never
        started, and egress proxies and their volumes whose clone container is gone; one line
        per thing removed."""
        removed: list[str] = []
        alive = set()
        for clone_id, container in self.clones():
            gone = not (self.clones_dir / clone_id).is_dir()
            if not gone and state(container) != "created":
                alive.add(clone_id)
                continue
            why = "its run folder is gone" if gone else "it was never started"
            self.remove_all(clone_id)
            removed.append(f"container {container.name} ({why})")
            log.warning("removed container %s: %s", container.name, why)
        for helper in self.labelled(LABEL_PROXY_OF):
            if helper.labels.get(LABEL_PROXY_OF, "") not in alive:
                with contextlib.suppress(docker.errors.NotFound):
                    helper.remove(force=True)
                    removed.append(f"container {helper.name} (its clone is gone)")
        for volume in self.volumes():
            if (volume.attrs.get("Labels") or {}).get(LABEL_EGRESS_OF, "") not in alive:
                with contextlib.suppress(docker.errors.NotFound):
                    volume.remove(force=True)
                    removed.append(f"volume {volume.name} (its clone is gone)")
        return removed

    def traces(self, clone_id: str) -> list[str]:
        """Everything Docker still holds of one clone: containers and volumes."""
        left = []
        for name in (container_name(clone_id), proxy_name(clone_id)):
            container = self.container(name)
            if container is not None:
                left.append(f"container {name} ({state(container)})")
        if self.volume(volume_name(clone_id)) is not None:
            left.append(f"volume {volume_name(clone_id)}")
        return left


def state(container: Container) -> str:
    return str(container.attrs.get("State", {}).get("Status", "unknown"))


def status_of(clone_id: str, container: Container | None) -> CloneStatus:
    """A clone's status as its container shows it: one created but never started is as good
    as missing, and an exited one brings the end of its output."""
    if container is None:
        return CloneStatus(clone_id, LaunchState.MISSING)
    found = state(container)
    if found in RUNNING_STATES:
        return CloneStatus(clone_id, LaunchState.RUNNING)
    if found not in _EXITED_STATES:
        return CloneStatus(clone_id, LaunchState.MISSING)  # created, never started
    info = container.attrs.get("State", {})
    tail = _logs(container)
    if info.get("OOMKilled"):
        limit = container.attrs.get("HostConfig", {}).get("Memory") or 0
        tail += f"\n(the clone ran out of memory: its limit is {limit // 2**20} MiB)"
    return CloneStatus(clone_id, LaunchState.EXITED, info.get("ExitCode"), tail.strip("\n"))


def wait_not_running(container: Container, clone_id: str) -> None:
    """Wait until a stopped container no longer runs, killing it should it linger."""
    deadline = time.monotonic() + STOP_CHECK_S
    while True:
        try:
            container.reload()
        except docker.errors.NotFound:
            return
        if state(container) not in RUNNING_STATES:
            return
        if time.monotonic() > deadline:
            raise PluginUnavailable(f"clone {clone_id} is still running after docker stop")
        with contextlib.suppress(docker.errors.APIError):  # it may end meanwhile
            container.kill()
        time.sleep(0.1)


def _logs(container: Container) -> str:
    try:
        data: bytes = container.logs(stdout=True, stderr=True, tail=TAIL_LINES)
    except docker.errors.NotFound:
        return ""
    return data.decode("utf-8", errors="replace")


def explain(error: docker.errors.APIError) -> str:
    return str(error.explanation or error)


def unreachable(error: Exception) -> PluginUnavailable:
    return PluginUnavailable(
        f"cannot reach Docker ({error}); start Docker (Docker Desktop, or `sudo systemctl "
        "start docker` on Linux) and make sure this user may use it"
    )


def remove_container(container: Container) -> None:
    """Remove `container` with its anonymous volumes. One removed meanwhile is gone, and one
    whose removal another caller began (a spare whose start failed, removed by the thread that
    started it while a launch removes the spares of its folder) is going: neither is an error."""
    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409 or "already in progress" not in str(error.explanation):
            raise
