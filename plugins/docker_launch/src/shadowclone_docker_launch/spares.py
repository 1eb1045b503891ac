"""Spares: containers started ahead of their clone, so a launch need not wait for one.

A spare (`keep`: a container started in a spare run folder, waiting on a pipe there until
`launch` names its clone) is named `shadowclone-spare-<spare>` and labelled with its folder's
device and inode and a digest of its spec; the launch that takes it up renames it after the
clone (labels cannot change), and it is found by that name from then on.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path

import docker.errors
from docker.models.containers import Container
from docker.types import Mount
from shadowclone.plugin import LaunchSpec, NetworkMode, PluginUnavailable, Refused

from shadowclone_docker_launch import services
from shadowclone_docker_launch.image_check import check_image
from shadowclone_docker_launch.names import (
    HOST_GATEWAY,
    LABEL_SCOPE,
    LABEL_SPARE,
    LABEL_SPARE_SPEC,
    SPARE_PIPE,
    SPARE_PREFIX,
    SPARE_VARIABLE,
    check_id,
    container_name,
    spare_name,
)
from shadowclone_docker_launch.recipe import Recipe
from shadowclone_docker_launch.scope import DockerScope, explain, state

log = logging.getLogger(__name__)

SPARE_READY_S = 2.0
"""How long a launch waits for a running spare to open its pipe."""


def keep(docker_scope: DockerScope, recipe: Recipe, spec: LaunchSpec) -> None:
    """A container for a clone of `spec`'s kind, started in the spare folder
    `spec.run_folder` and waiting (image/clone-entry) until `launch` names its clone on the
    folder's pipe. Labelled with the folder's identity (device and inode, which renaming
    it keeps) and a digest of all it was made with but the clone."""
    check_id(spec.clone_id)
    if spec.network is not NetworkMode.OPEN or spec.environment is not None:
        raise Refused("only a clone on the open network, of a ready image, has a spare")
    image_id = check_image(docker_scope.client, spec.image, recipe.owner[0])
    if services.services_of(docker_scope.client, spec.image) is not None:
        raise Refused("a clone with Compose services has no spare: they start at its launch")
    folder = spec.run_folder.absolute()
    pipe = folder / SPARE_PIPE
    os.mkfifo(pipe, 0o600)
    os.chmod(pipe, 0o600)
    if os.geteuid() == 0:  # read as the owner (image/clone-entry), whose folder it is
        os.chown(pipe, *recipe.owner)
    mounts = recipe.mounts(spec)
    labels = {
        **spec.labels,
        LABEL_SCOPE: docker_scope.scope,
        LABEL_SPARE: identity_of(folder),
        LABEL_SPARE_SPEC: recipe.digest(spec, image_id, mounts),
    }
    environment = {**recipe.environment(spec, spare=True), SPARE_VARIABLE: "1"}
    name = spare_name(spec.clone_id)
    try:
        container = recipe.create(
            docker_scope.client,
            spec,
            name,
            labels,
            environment,
            mounts,
            {"extra_hosts": HOST_GATEWAY},
        )
        container.start()
    except docker.errors.APIError as error:
        docker_scope.remove_containers([name])
        raise PluginUnavailable(
            f"Docker could not start a spare for {folder}: {explain(error)}"
        ) from None
    log.info("spare %s waits in container %s", folder.name, container.short_id)


def drop(docker_scope: DockerScope, folder: Path) -> None:
    docker_scope.remove_containers(
        [str(c.name) for c in waiting(docker_scope, identity_of(folder))]
    )


def drop_all_but(docker_scope: DockerScope, kept_folders: Sequence[Path]) -> list[str]:
    """Remove the spares of every folder not in `kept_folders`; one line per spare removed."""
    kept = set()
    for folder in kept_folders:
        with contextlib.suppress(OSError):
            kept.add(identity_of(folder))
    dropped = [
        str(container.name)
        for container in waiting(docker_scope)
        if container.labels.get(LABEL_SPARE) not in kept
    ]
    docker_scope.remove_containers(dropped)
    return [f"spare container {name}" for name in dropped]


def take(
    docker_scope: DockerScope, recipe: Recipe, spec: LaunchSpec, image_id: str, mounts: list[Mount]
) -> bool:
    """Hand the clone to the spare started in its folder, if there is one and it was made
    with what this launch would make: its name becomes the clone's, and it is told the
    clone on the folder's pipe. Any other spare of the folder is removed."""
    pipe = spec.run_folder / SPARE_PIPE
    try:
        if not stat.S_ISFIFO(os.lstat(pipe).st_mode):
            return False
    except FileNotFoundError:
        return False
    try:
        found = waiting(docker_scope, identity_of(spec.run_folder))
        digest = recipe.digest(spec, image_id, mounts)
        for spare in found:
            if (
                spec.network is NetworkMode.OPEN
                and spare.labels.get(LABEL_SPARE_SPEC) == digest
                and state(spare) == "running"
                and _tell(pipe, spec.clone_id)
            ):
                try:
                    spare.rename(container_name(spec.clone_id))
                except docker.errors.APIError as error:
                    docker_scope.remove_containers([str(spare.name)])
                    raise PluginUnavailable(
                        f"Docker could not name clone {spec.clone_id}'s container: {explain(error)}"
                    ) from None
                docker_scope.remove_containers([str(c.name) for c in found if c is not spare])
                log.info("clone %s runs in spare container %s", spec.clone_id, spare.short_id)
                return True
        if found:
            log.info("clone %s: the spare in its folder was made for another launch", spec.clone_id)
        docker_scope.remove_containers([str(c.name) for c in found])
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pipe)


def waiting(docker_scope: DockerScope, identity: str | None = None) -> list[Container]:
    """The containers waiting for a clone (named as spares still), of one folder or all."""
    label = LABEL_SPARE if identity is None else f"{LABEL_SPARE}={identity}"
    return [c for c in docker_scope.labelled(label) if str(c.name).startswith(SPARE_PREFIX)]


def identity_of(folder: Path) -> str:
    """A folder's device and inode: what stays the same when serve renames a spare's folder
    into a clone's."""
    found = os.stat(folder)
    return f"{found.st_dev}:{found.st_ino}"


def _tell(pipe: Path, clone_id: str) -> bool:
    """Name the clone to the spare waiting on `pipe`; False if none reads it. A spare just
    started may not have opened it yet: it is given `SPARE_READY_S`."""
    deadline = time.monotonic() + SPARE_READY_S
    while True:
        try:
            descriptor = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as error:  # ENXIO: no reader (yet)
            if error.errno == errno.ENXIO and time.monotonic() < deadline:
                time.sleep(0.005)
                continue
            log.info("no spare waits on %s: %s", pipe, error.strerror)
            return False
        break
    try:
        return os.write(descriptor, f"{clone_id}\n".encode()) > 0  # one write, under PIPE_BUF
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)
