"""The Docker launcher: each clone runs in a container of the clone image.

A clone's container is named `shadowclone-<clone id>` and labelled with the clone id and the
clones folder it belongs to (its scope, `scope.py`), so a launcher made after a restart of serve
finds it again, and two shadowclone homes on one machine never touch each other's clones. How
the container is made (users, capabilities, mounts) is `recipe.py`'s; a network-off clone's
egress proxy is `egress.py`'s; containers started ahead of their clone are `spares.py`'s.

This module holds the `Launcher` protocol's side, which puts those together, and the names
other code imports from here.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import docker
import docker.errors
from docker.models.containers import Container
from shadowclone.plugin import (
    CloneStatus,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    PluginUnavailable,
    Refused,
    one_line,
)

from shadowclone_docker_launch import egress, services, spares
from shadowclone_docker_launch.image_check import check_image
from shadowclone_docker_launch.names import (
    CAPABILITIES,
    CLONE_UID,
    HOST_GATEWAY,
    LABEL_CLONE,
    LABEL_SCOPE,
    LABEL_SPARE,
    RUN_FOLDER,
    SPARE_PIPE,
    SPARE_PREFIX,
    VERSION_LABEL,
    check_id,
    container_name,
    proxy_name,
    volume_name,
)
from shadowclone_docker_launch.prebuilds import LABEL_PREBUILD, Prebuilds
from shadowclone_docker_launch.recipe import CommandFor, Recipe
from shadowclone_docker_launch.scope import (
    RUNNING_STATES,
    DockerScope,
    explain,
    remove_container,
    state,
    status_of,
    unreachable,
    wait_not_running,
)

__all__ = [
    "CAPABILITIES",
    "CLONE_UID",
    "LABEL_CLONE",
    "LABEL_SCOPE",
    "LABEL_SPARE",
    "RUN_FOLDER",
    "SPARE_PIPE",
    "SPARE_PREFIX",
    "VERSION_LABEL",
    "CommandFor",
    "DockerLauncher",
    "container_name",
    "proxy_name",
    "volume_name",
]

log = logging.getLogger(__name__)


class DockerLauncher:
    """A `Launcher` that runs each clone in a container of the clone image."""

    def __init__(
        self,
        clones_dir: Path,
        image: str | None = None,
        *,
        client: docker.DockerClient | None = None,
        owner: tuple[int, int] | None = None,
        command_for: CommandFor | None = None,
    ) -> None:
        """`clones_dir` is the clones folder serve works on (the launcher's scope); `image`
        the config's image, which `check` looks for; `owner` the uid and gid whose files the
        clones use (default: this process's)."""
        self._docker = DockerScope(clones_dir.absolute(), client)
        self.image = image
        self.owner = owner if owner is not None else (os.getuid(), os.getgid())
        self.command_for = command_for
        self._prebuilds: Prebuilds | None = None

    @property
    def clones_dir(self) -> Path:
        return self._docker.clones_dir

    @property
    def scope(self) -> str:
        return self._docker.scope

    @property
    def client(self) -> docker.DockerClient:
        return self._docker.client

    @property
    def _recipe(self) -> Recipe:
        """Made at each use: tests change `owner` and `command_for` on a launcher."""
        return Recipe(self.owner, self.command_for)

    # ------------------------------------------------------------------ the protocol

    def check(self) -> None:
        client = self.client
        try:
            client.ping()
        except docker.errors.DockerException as error:
            raise unreachable(error) from None
        if self.image is not None:
            self._check_image(self.image)

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        """The repository's environment image, made on the clone image when it is missing; or
        its prebuilt image (`prebuilds`), made in the background."""
        if spec.environment is None:
            return spec
        from shadowclone_docker_launch.environments import prepare_image

        tag, environment = prepare_image(spec.environment, spec.image, say, cancel)
        if spec.repo_cache is not None and environment.compose is None:  # needs its services
            cache = self._recipe.repo_cache(spec.repo_cache)
            tag = self.prebuilds(spec.environment.network).choose(environment, tag, cache, say)
        return attrs.evolve(spec, image=tag)

    def prebuilds(self, network: str | None) -> Prebuilds:
        """The launcher's prebuilt images (one keeper for the launcher's life: it knows the
        prebuilds under way)."""
        if self._prebuilds is None:
            self._prebuilds = Prebuilds(lambda: self.client, network, self.scope)
        self._prebuilds.network = network
        return self._prebuilds

    def launch(self, spec: LaunchSpec) -> None:
        check_id(spec.clone_id)
        existing = self._docker.container(container_name(spec.clone_id))
        if existing is not None:
            if state(existing) != "created":
                raise Refused(f"clone {spec.clone_id} already has a container ({state(existing)})")
            self._docker.remove_all(spec.clone_id)  # left by a launch that died before its start
        image_id = self._check_image(spec.image)
        recipe = self._recipe
        mounts = recipe.mounts(spec)
        composed = services.services_of(self.client, spec.image)
        if composed is None and spares.take(self._docker, recipe, spec, image_id, mounts):
            return
        environment = recipe.environment(spec)
        options: dict[str, Any]
        if spec.network is NetworkMode.MODEL_ONLY:  # without its Compose services: no network
            options = egress.shut_off(self._docker, spec, mounts, environment)
        elif composed is not None:
            options = services.start(self._docker, spec.clone_id, composed)
        else:
            options = {"extra_hosts": HOST_GATEWAY}
        labels = {**spec.labels, LABEL_CLONE: spec.clone_id, LABEL_SCOPE: self.scope}
        try:
            container = recipe.create(
                self.client,
                spec,
                container_name(spec.clone_id),
                labels,
                environment,
                mounts,
                options,
            )
        except docker.errors.APIError as error:
            if error.status_code == 409:  # another launcher made it just now: leave it be
                raise Refused(f"clone {spec.clone_id} already has a container") from None
            self.remove(spec.clone_id)
            raise PluginUnavailable(
                f"Docker could not create clone {spec.clone_id}: {explain(error)}"
            ) from None
        try:
            container.start()
        except docker.errors.APIError as error:
            self.remove(spec.clone_id)
            raise PluginUnavailable(
                f"Docker could not start clone {spec.clone_id}: {explain(error)}"
            ) from None
        log.info("clone %s runs in container %s", spec.clone_id, container.short_id)

    def status(self, clone_id: str) -> CloneStatus:
        check_id(clone_id)
        return status_of(clone_id, self._docker.container(container_name(clone_id)))

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        check_id(clone_id)
        container = self._docker.container(container_name(clone_id))
        if container is not None and state(container) in RUNNING_STATES:
            # Docker sends the stop signal to the init, which hands it on, and kills the
            # container when the grace time is over.
            timeout = max(0, math.ceil(grace_s))
            with contextlib.suppress(docker.errors.NotFound):
                container.stop(timeout=timeout)
            wait_not_running(container, clone_id)
        helper = self._docker.container(proxy_name(clone_id))
        if helper is not None and state(helper) in RUNNING_STATES:
            with contextlib.suppress(docker.errors.NotFound):
                helper.stop(timeout=0)
        services.stop(self._docker, clone_id)

    def remove(self, clone_id: str) -> None:
        check_id(clone_id)
        self._docker.remove_all(clone_id)
        services.remove(self._docker, clone_id)

    def end_phase(self, clone_id: str) -> None:
        """The phase's container goes; the clone's Compose services stay for its next phase
        (`PhasedLauncher`)."""
        check_id(clone_id)
        self._docker.remove_all(clone_id)

    def running(self) -> Sequence[CloneStatus]:
        found = []
        for clone_id, container in self._docker.clones():
            status = status_of(clone_id, container)
            if status.state is not LaunchState.MISSING:
                found.append(status)
        return sorted(found, key=lambda status: status.clone_id)

    def reap_strays(self) -> list[str]:
        """Remove what crashes left in this launcher's scope (`DockerScope.reap_strays`).
        serve calls it at start, after taking up its clones; returns one line per thing
        removed."""
        removed = self._docker.reap_strays()
        removed += services.reap(self._docker)
        for container in self._docker.labelled(LABEL_PREBUILD):  # its serve died during it
            remove_container(container)
            removed.append(f"container {container.name} (a prebuild no serve finishes)")
        return removed

    # ------------------------------------------------------------------ spares

    def keep_spare(self, spec: LaunchSpec) -> None:
        spares.keep(self._docker, self._recipe, spec)

    def drop_spare(self, folder: Path) -> None:
        spares.drop(self._docker, folder)

    def drop_spares(self, keep: Sequence[Path]) -> list[str]:
        return spares.drop_all_but(self._docker, keep)

    def _spares(self, identity: str | None = None) -> list[Container]:
        """The containers waiting for a clone (the tests count them)."""
        return spares.waiting(self._docker, identity)

    # ------------------------------------------------------------------ beyond the protocol

    def host_address(self) -> str:
        """Where host.docker.internal leads from a container of the image (the default
        bridge's gateway), asked of a container."""
        if self.image is None:
            raise PluginUnavailable("the Docker launcher needs an image to ask for the host")
        try:
            output = self.client.containers.run(
                self.image,
                entrypoint=["getent", "ahostsv4", "host.docker.internal"],
                command=[],
                extra_hosts={"host.docker.internal": "host-gateway"},
                remove=True,
            )
        except docker.errors.DockerException as error:
            words = explain(error) if isinstance(error, docker.errors.APIError) else str(error)
            raise PluginUnavailable(
                f"cannot run the image {self.image} ({one_line(words)}); build it with "
                "`shadowclone image build` (`--demo` for the demo's)"
            ) from None
        found = bytes(output).decode(errors="replace").split()
        if not found:
            raise PluginUnavailable("Docker gives containers no address of this machine")
        return found[0]

    def traces(self, clone_id: str) -> list[str]:
        """Everything Docker still holds of one clone: containers, networks and volumes."""
        return self._docker.traces(clone_id) + services.traces(self._docker, clone_id)

    def _check_image(self, image: str) -> str:
        return check_image(self.client, image, self.owner[0])
