"""The swarm launcher: each clone a one-replica service of the clone image, never restarted.

A clone's service is named `shadowclone-<clone id>` and labelled like the Docker launcher's
containers (the clone, the clones folder: its scope), so a launcher made after a restart of
serve finds its clones again. The container is made as the Docker launcher makes it
(`Recipe`): root with four capabilities, the image's entry point handing the run program the
owner's uid, Docker's init, the spec's limits (as reservations too, so that the swarm places a
clone where it fits). What differs is what a service allows:

- The secrets file becomes a swarm secret made from its path by the docker CLI (shadowclone
  never opens it), mounted read-only where the run program reads it, and removed with the clone.
- The run folder is mounted from the same path on the node (`run_folders = "shared"`: the
  clones folder at one path on every node).
- A clone is never run twice: restart condition none; a task whose node has been down longer
  than `node_lost_s` is ended (the service scaled to nothing, so a node that comes back stops
  it) and reported exited, with why.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import docker
import docker.errors
import docker.utils
from docker.models.services import Service
from docker.types import (
    Mount,
    Resources,
    RestartPolicy,
    SecretReference,
    ServiceMode,
)
from shadowclone.plugin import (
    CloneStatus,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    PluginUnavailable,
    Refused,
)
from shadowclone_docker_launch.names import (
    CAPABILITIES,
    LABEL_CLONE,
    LABEL_SCOPE,
    PRIVATE,
    SECRETS_FILE,
    check_id,
    container_name,
)
from shadowclone_docker_launch.recipe import CommandFor, Recipe
from shadowclone_docker_launch.scope import explain, unreachable

from shadowclone_swarm_launch import egress, nodes, sent
from shadowclone_swarm_launch.images import Images
from shadowclone_swarm_launch.secrets import Secrets
from shadowclone_swarm_launch.settings import SwarmSettings
from shadowclone_swarm_launch.tasks import Tasks

log = logging.getLogger(__name__)

DOCKER_TIMEOUT_S = 60
STOP_CHECK_S = 30.0


class SwarmLauncher:
    """A `Launcher` that runs each clone as a one-replica service on a Docker Swarm."""

    def __init__(
        self,
        clones_dir: Path,
        image: str | None = None,
        *,
        settings: SwarmSettings | None = None,
        client: docker.DockerClient | None = None,
        local: docker.DockerClient | None = None,
        owner: tuple[int, int] | None = None,
        command_for: CommandFor | None = None,
    ) -> None:
        self.clones_dir = clones_dir.absolute()
        self.scope = str(self.clones_dir)
        self.image = image
        self.settings = settings or SwarmSettings()
        self.owner = owner if owner is not None else (os.getuid(), os.getgid())
        self.command_for = command_for
        self._client = client
        self._local = local
        """This machine's Docker, where images are built (default: Docker's own settings)."""
        self._down_since: dict[str, float] = {}
        """By node id: when this launcher first saw it down."""

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                if self.settings.manager:
                    self._client = docker.DockerClient(
                        base_url=self.settings.manager, timeout=DOCKER_TIMEOUT_S
                    )
                else:
                    self._client = docker.from_env(timeout=DOCKER_TIMEOUT_S)
            except docker.errors.DockerException as error:
                raise unreachable(error) from None
        return self._client

    @property
    def _images(self) -> Images:
        return Images(self._local, self.settings.registry)

    @property
    def _tasks(self) -> Tasks:
        return Tasks(self.client, self.settings.node_lost_s, self._down_since)

    @property
    def _secrets(self) -> Secrets:
        return Secrets(self.client, self.scope, self.settings.manager)

    # ------------------------------------------------------------------ the protocol

    def check(self) -> None:
        nodes.check(self.client, self.settings, self.clones_dir)

    def needs_prepare(self, spec: LaunchSpec) -> bool:
        """An image not pushed yet (`PreparingLauncher`): `prepare` pushes it, on serve's
        preparing thread."""
        return not self._images.pushed(spec.image)

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        """The environment's image is the Docker launcher's to build (on this machine); the
        image is then pushed to the registry, once, for `launch` to run by digest."""
        if spec.environment is not None:
            from shadowclone_docker_launch.launcher import DockerLauncher

            spec = DockerLauncher(self.clones_dir, self.image).prepare(spec, say, cancel)
        if not self._images.pushed(spec.image):
            say(f"pushing {spec.image} to {self.settings.registry}, for the swarm's nodes")
            self._images.reference(spec.image)
        return spec

    def launch(self, spec: LaunchSpec) -> None:
        check_id(spec.clone_id)
        if spec.network is not NetworkMode.OPEN and not spec.model_host:
            raise Refused(
                f"clone {spec.clone_id} is network-off and its spec names no model host to reach"
            )
        relayed = self.relay_port() is not None
        if relayed:
            if spec.relay is None:
                raise Refused(f"clone {spec.clone_id} has no access to serve's relay")
            spec = sent.checked(spec)
        if self._service(spec.clone_id) is not None:
            raise Refused(f"clone {spec.clone_id} already has a service")
        image = self._images.reference(spec.image)
        networks: list[str] = []
        way_out: dict[str, str] = {"host.docker.internal": self.host_address()}
        environment: dict[str, str] = sent.environment(spec) if relayed else {}
        if spec.network is not NetworkMode.OPEN:  # its proxy's internal network, only
            also = (sent.relay_address(spec),) if relayed else ()
            networks, out = egress.shut_off(self.client, spec, image, self.scope, also)
            environment.update(out)
            way_out = {}
        recipe = Recipe(self.owner, self.command_for)
        labels = {**spec.labels, LABEL_CLONE: spec.clone_id, LABEL_SCOPE: self.scope}
        secrets = []
        if spec.secrets_file.exists():  # a missing file stays missing: the clone says so
            secret = self._secrets.create(spec.clone_id, spec.secrets_file, labels)
            uid, gid = ("0", "0") if self.owner[0] == 0 else map(str, self.owner)
            secrets.append(
                SecretReference(str(secret.id), secret.name, SECRETS_FILE, uid, gid, mode=0o400)
            )
        environment = {**recipe.environment(spec), **environment}
        mounts = service_mounts(self.owner, spec)
        memory = int(docker.utils.parse_bytes(spec.memory)) if spec.memory else None
        cpus = int(spec.cpus * 1e9) if spec.cpus else None
        try:
            services: Any = self.client.services  # its stub leaves it untyped
            services.create(
                image,
                name=container_name(spec.clone_id),
                labels=labels,
                mode=ServiceMode("replicated", replicas=1),
                restart_policy=RestartPolicy(condition="none"),
                resources=Resources(
                    cpu_limit=cpus, mem_limit=memory, cpu_reservation=cpus, mem_reservation=memory
                ),
                args=recipe.command(spec),
                hostname="clone",
                env=[f"{name}={value}" for name, value in environment.items()],
                user="0:0",
                container_labels=labels,
                mounts=sent.mounts(mounts, spec, labels) if relayed else mounts,
                **(
                    {"constraints": sent.constraints(spec)}
                    if relayed and sent.node_of(spec)
                    else {}
                ),
                secrets=secrets,
                init=True,
                cap_add=list(CAPABILITIES),
                cap_drop=["ALL"],
                hosts=way_out,
                networks=networks,
                stop_grace_period=10 * 10**9,
            )
        except docker.errors.APIError as error:
            self._secrets.remove(spec.clone_id)
            egress.remove(self.client, spec.clone_id, self.scope)
            if error.status_code == 409:  # another launcher made it just now
                raise Refused(f"clone {spec.clone_id} already has a service") from None
            raise PluginUnavailable(
                f"the swarm could not start clone {spec.clone_id}: {explain(error)}"
            ) from None
        log.info("clone %s runs as swarm service %s", spec.clone_id, container_name(spec.clone_id))

    def status(self, clone_id: str) -> CloneStatus:
        check_id(clone_id)
        service = self._service(clone_id)
        if service is None:
            return CloneStatus(clone_id, LaunchState.MISSING)
        return self._tasks.status_of(clone_id, service)

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        check_id(clone_id)
        service = self._service(clone_id)
        if (
            service is None
            or self._tasks.status_of(clone_id, service).state is not LaunchState.RUNNING
        ):
            return
        grace_ns = max(0, math.ceil(grace_s)) * 10**9
        try:
            cast(Any, service).update(
                mode=ServiceMode("replicated", replicas=0), stop_grace_period=grace_ns
            )
        except docker.errors.APIError as error:
            raise PluginUnavailable(
                f"the swarm could not stop clone {clone_id}: {explain(error)}"
            ) from None
        deadline = time.monotonic() + grace_s + STOP_CHECK_S
        while time.monotonic() < deadline:
            service.reload()
            if self._tasks.status_of(clone_id, service).state is not LaunchState.RUNNING:
                return
            time.sleep(0.2)
        raise PluginUnavailable(f"clone {clone_id} is still running after its stop")

    def remove(self, clone_id: str) -> None:
        check_id(clone_id)
        service = self._service(clone_id)
        if service is not None:
            if self.relay_port() is not None:  # its later phases go where its folder is
                sent.note_node(self.clones_dir / clone_id, service)
            with contextlib.suppress(docker.errors.NotFound):  # removed meanwhile
                cast(Any, service).remove()
        self._secrets.remove(clone_id)
        egress.remove(self.client, clone_id, self.scope)

    def running(self) -> Sequence[CloneStatus]:
        found = []
        for service in self._services():
            clone_id = (service.attrs.get("Spec", {}).get("Labels") or {}).get(LABEL_CLONE, "")
            if clone_id:
                found.append(self._tasks.status_of(clone_id, service))
        return sorted(found, key=lambda status: status.clone_id)

    def reap_strays(self) -> list[str]:
        """Services of clones whose run folder is gone, and secrets whose service is gone."""
        removed = []
        alive = set()
        for service in self._services():
            clone_id = (service.attrs.get("Spec", {}).get("Labels") or {}).get(LABEL_CLONE, "")
            if clone_id and (self.clones_dir / clone_id).is_dir():
                alive.add(clone_id)
                continue
            self.remove(clone_id) if clone_id else cast(Any, service).remove()
            removed.append(f"service {service.name} (its run folder is gone)")
        removed += self._secrets.reap(alive)
        return removed + egress.reap(self.client, self.scope, alive)

    def host_address(self) -> str:
        return self.settings.host()

    def relay_port(self) -> int | None:
        """With run folders sent (`RelayingLauncher`): where serve's relay listens."""
        return self.settings.relay_port if self.settings.run_folders == "sent" else None

    # ------------------------------------------------------------------ beyond the protocol

    def describe(self) -> list[tuple[str, bool, str]]:
        """Each node of the swarm, with its clones and what it offers (`DescribedLauncher`);
        the registry, when one is named."""
        found = nodes.describe(self.client, self._services(), self.settings.node_lost_s)
        if self.settings.registry:
            found.append(self._images.check())
        return found

    def traces(self, clone_id: str) -> list[str]:
        """Everything the swarm still holds of one clone: its service and secrets."""
        left = []
        service = self._service(clone_id)
        if service is not None:
            left.append(f"service {service.name}")
        left += [f"secret {name}" for name in self._secrets.names(clone_id)]
        return left + egress.traces(self.client, clone_id, self.scope)

    def _service(self, clone_id: str) -> Service | None:
        try:
            service: Service = cast(Any, self.client.services).get(container_name(clone_id))
        except docker.errors.NotFound:
            return None
        except docker.errors.DockerException as error:
            raise unreachable(error) from None
        labels = service.attrs.get("Spec", {}).get("Labels") or {}
        return service if labels.get(LABEL_SCOPE) == self.scope else None

    def _services(self) -> list[Service]:
        try:
            found: list[Service] = self.client.services.list(
                filters={"label": [LABEL_CLONE, f"{LABEL_SCOPE}={self.scope}"]}
            )
        except docker.errors.DockerException as error:
            raise unreachable(error) from None
        return found


def service_mounts(owner: tuple[int, int], spec: LaunchSpec) -> list[Mount]:
    """The Docker launcher's mounts, but for the secrets (a swarm secret) and its in-memory
    folders, which a service makes as mounts."""
    mounts = Recipe(owner, None).mounts(spec)
    mounts = [mount for mount in mounts if mount["Target"] != SECRETS_FILE]
    mounts.append(Mount("/tmp", None, type="tmpfs", tmpfs_mode=0o1777))
    if owner[0] == 0:
        mounts.append(Mount(PRIVATE, None, type="tmpfs", tmpfs_mode=0o700))
    return mounts
