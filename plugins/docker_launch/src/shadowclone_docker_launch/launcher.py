"""The Docker launcher: each clone runs in a container of the clone image.

A clone's container is named `shadowclone-<clone id>` and labelled with the clone id and the
clones folder it belongs to (its scope), so a launcher made after a restart of serve finds it
again, and two shadowclone homes on one machine never touch each other's clones. A spare
(`keep_spare`: a container started ahead in a spare run folder, waiting on a pipe there until
`launch` names its clone) is named `shadowclone-spare-<spare>` and labelled with its folder's
device and inode and a digest of its spec; the launch that takes it up renames it after the
clone (labels cannot change), and it is found by that name from then on.

What a clone sees: its run folder, mounted read-write at /clone/run, and the owner's secrets
file, mounted read-only at /clone/secrets.toml (never copied by the host, never a variable).
It runs under Docker's init, with the CPU and memory limits of the spec, no-new-privileges, and
in-memory /tmp and home. No Docker socket is ever mounted.

Two users: the run program alone reads the secrets; the engine, which reads text strangers
wrote, runs as the image's `engine` user, who can read neither the secrets nor the run
program's memory, environment or descriptors, nor signal it. Switching users takes
capabilities, so every container starts as root with none but CHOWN, SETUID, SETGID and KILL;
the image's entry point (image/clone-entry) runs the run program as the owner's uid:gid, which
it is told in SHADOWCLONE_OWNER, keeping those four as ambient capabilities, and the run program
starts the engine with none. As the owner's uid:gid, the run folder and the 0600 secrets file
are the run program's own, and what it writes stays the owner's. When the owner is root (serve
run as root, as in CI) the run program is the image's `clone` user instead: the entry point
hands it the run folder and copies the secrets to an in-memory tmpfs at /run/clone. An owner
whose uid is the engine user's is refused: the image must be built with another. Docker's init
stays root and needs KILL to hand the stop signal to the clone.

A login that renews its tokens (a ChatGPT plan) has a state folder on the host
(`LaunchSpec.login_state`), mounted at /clone/login-state for the run program; for a root owner
a subfolder of it is handed to the `clone` user, so no host user of that uid can reach it.

Network: an open clone is on Docker's default bridge and reaches servers on the host at
host.docker.internal. A network-off clone (`NetworkMode.MODEL_ONLY`) has no network but
loopback; its one way out is an egress proxy container (`proxy.py`, run from the clone image)
on the default bridge, which forwards only to the spec's model host (and the login's token
host), and only for a client holding the clone's egress token. The proxy listens on a Unix
socket in a volume the two share, and a relay in the clone (image/clone-entry) listens on
127.0.0.1:3128. The run program alone gets the token, in SHADOWCLONE_EGRESS_PROXY: its model
proxy goes out that way, and the engine, which reaches the model only through the run
program's model proxy, cannot use the relay. (An internal Docker network is not enough: from
one, a container still reaches every address of the host.)
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import docker
import docker.errors
from docker.models.containers import Container
from docker.models.volumes import Volume
from docker.types import Mount
from shadowclone.plugin import (
    CORE_VERSION,
    CloneStatus,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    PluginUnavailable,
    Refused,
    contract,
    one_line,
)

from shadowclone_docker_launch import proxy

log = logging.getLogger(__name__)

LABEL_CLONE = contract.LABEL_CLONE
LABEL_TARGET = contract.LABEL_TARGET
LABEL_SPARE = "shadowclone.spare-of"
"""On a spare: the device and inode of the folder it waits in (a rename keeps them)."""
LABEL_SPARE_SPEC = "shadowclone.spare-spec"
"""On a spare: the digest of all it was made with but its clone (`_digest`)."""
CONTAINER_PREFIX = "shadowclone-"
SPARE_PREFIX = "shadowclone-spare-"
SPARE_PIPE = ".spare"
"""The pipe in a spare's folder on which `launch` names its clone (image/clone-entry)."""
SPARE_VARIABLE = "SHADOWCLONE_SPARE"
SPARE_READY_S = 2.0
"""How long a launch waits for a running spare to open its pipe."""
LABEL_SCOPE = "shadowclone.clones-folder"
LABEL_PROXY_OF = "shadowclone.proxy-of"
LABEL_EGRESS_OF = "shadowclone.egress-of"
VERSION_LABEL = "io.shadowclone.version"
"""The shadowclone an image holds (`shadowclone image build` sets it)."""

RUN_FOLDER = contract.CONTAINER_RUN_FOLDER
SECRETS_FILE = contract.CONTAINER_SECRETS_FILE
LOGIN_STATE = "/clone/login-state"
HOME = "/home/clone"
PRIVATE = "/run/clone"
"""The in-memory folder where the image's entry point copies the secrets of a root owner."""
CLONE_UID = 1000
"""The image's `clone` user (image/Dockerfile's CLONE_UID): the run program's, for a root owner."""
CAPABILITIES = ("CHOWN", "SETUID", "SETGID", "KILL")
"""All a clone's container gets: what its run program needs to start the engine as another user
and stop it (image/clone-entry). Docker's init uses KILL to hand on the stop signal."""
OWNER_VARIABLE = "SHADOWCLONE_OWNER"
EGRESS_VARIABLE = contract.EGRESS_VARIABLE
"""The run program's way out of a network-off clone: the relay's URL with the egress token."""
LOGIN_STATE_VARIABLE = contract.LOGIN_STATE_VARIABLE
"""The owner's `uid:gid`, for the image's entry point."""
ENGINE_USER_VARIABLE = contract.ENGINE_USER_VARIABLE
"""Where the image names its engine user's `uid:gid` (image/Dockerfile)."""
EGRESS_FOLDER = "/egress"
"""Where the proxy's socket volume is mounted, in the proxy and in the clone (the image makes
the folder, owned by `clone`, so a new volume starts out writable by the proxy)."""
EGRESS_SOCKET = f"{EGRESS_FOLDER}/proxy.sock"
RELAY_ADDRESS = "127.0.0.1:3128"
"""Where the clone's relay listens (image/clone-entry)."""
EGRESS_USER = "shadowclone"
"""The user name in the egress proxy URL; the password is the clone's egress token."""
HOST_GATEWAY = {"host.docker.internal": "host-gateway"}

TAIL_LINES = 40
DOCKER_TIMEOUT_S = 60
PROXY_READY_S = 15.0
STOP_CHECK_S = 10.0

CommandFor = Callable[[LaunchSpec], Sequence[str] | None]
"""What a clone runs instead of the image's command (tests play scripts); None: the image's."""

_RUNNING_STATES = {"running", "restarting", "paused"}
_EXITED_STATES = {"exited", "dead"}


def container_name(clone_id: str) -> str:
    return f"{CONTAINER_PREFIX}{clone_id}"


def spare_name(spare: str) -> str:
    return f"{SPARE_PREFIX}{spare}"


def proxy_name(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-proxy"


def volume_name(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-egress"


def _check_id(clone_id: str) -> None:
    if not clone_id or not all(c.isalnum() or c in "-_." for c in clone_id):
        raise Refused(f"{clone_id!r} is not a clone id")


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
        self.clones_dir = clones_dir.absolute()
        self.scope = str(self.clones_dir)
        self.image = image
        self.owner = owner if owner is not None else (os.getuid(), os.getgid())
        self.command_for = command_for
        self._client = client

    # ------------------------------------------------------------------ the protocol

    def check(self) -> None:
        client = self.client
        try:
            client.ping()
        except docker.errors.DockerException as error:
            raise _unreachable(error) from None
        if self.image is not None:
            self._check_image(self.image)

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        """The repository's environment image, made on the clone image when it is missing."""
        if spec.environment is None:
            return spec
        from shadowclone_docker_launch.environments import prepare_image

        return attrs.evolve(spec, image=prepare_image(spec.environment, spec.image, say, cancel))

    def launch(self, spec: LaunchSpec) -> None:
        _check_id(spec.clone_id)
        existing = self._container(container_name(spec.clone_id))
        if existing is not None:
            if _state(existing) != "created":
                raise Refused(f"clone {spec.clone_id} already has a container ({_state(existing)})")
            self._remove_all(spec.clone_id)  # left by a launch that died before its start
        image_id = self._check_image(spec.image)
        mounts = self._mounts(spec)
        if self._take_spare(spec, image_id, mounts):
            return
        environment = self._environment(spec)
        options: dict[str, Any] = {}
        if spec.network is NetworkMode.MODEL_ONLY:
            token = secrets.token_urlsafe(32)
            self._start_proxy(spec, token)
            options["network_mode"] = "none"
            mounts.append(
                Mount(EGRESS_FOLDER, volume_name(spec.clone_id), type="volume", read_only=True)
            )
            environment["SHADOWCLONE_EGRESS_SOCKET"] = EGRESS_SOCKET
            environment[EGRESS_VARIABLE] = f"http://{EGRESS_USER}:{token}@{RELAY_ADDRESS}"
            environment["NO_PROXY"] = environment["no_proxy"] = "localhost,127.0.0.1,::1"
        else:
            options["extra_hosts"] = HOST_GATEWAY
        labels = {**spec.labels, LABEL_CLONE: spec.clone_id, LABEL_SCOPE: self.scope}
        try:
            container = self._create(
                spec, container_name(spec.clone_id), labels, environment, mounts, options
            )
        except docker.errors.APIError as error:
            if error.status_code == 409:  # another launcher made it just now: leave it be
                raise Refused(f"clone {spec.clone_id} already has a container") from None
            self._remove_all(spec.clone_id)
            raise PluginUnavailable(
                f"Docker could not create clone {spec.clone_id}: {_explain(error)}"
            ) from None
        try:
            container.start()
        except docker.errors.APIError as error:
            self._remove_all(spec.clone_id)
            raise PluginUnavailable(
                f"Docker could not start clone {spec.clone_id}: {_explain(error)}"
            ) from None
        log.info("clone %s runs in container %s", spec.clone_id, container.short_id)

    # ------------------------------------------------------------------ spares

    def keep_spare(self, spec: LaunchSpec) -> None:
        """A container for a clone of `spec`'s kind, started in the spare folder
        `spec.run_folder` and waiting (image/clone-entry) until `launch` names its clone on the
        folder's pipe. Labelled with the folder's identity (device and inode, which renaming
        it keeps) and a digest of all it was made with but the clone."""
        _check_id(spec.clone_id)
        if spec.network is not NetworkMode.OPEN or spec.environment is not None:
            raise Refused("only a clone on the open network, of a ready image, has a spare")
        image_id = self._check_image(spec.image)
        folder = spec.run_folder.absolute()
        pipe = folder / SPARE_PIPE
        os.mkfifo(pipe, 0o600)
        os.chmod(pipe, 0o600)
        if os.geteuid() == 0:  # read as the owner (image/clone-entry), whose folder it is
            os.chown(pipe, *self.owner)
        mounts = self._mounts(spec)
        labels = {
            **spec.labels,
            LABEL_SCOPE: self.scope,
            LABEL_SPARE: _identity_of(folder),
            LABEL_SPARE_SPEC: self._digest(spec, image_id, mounts),
        }
        environment = {**self._environment(spec, spare=True), SPARE_VARIABLE: "1"}
        name = spare_name(spec.clone_id)
        try:
            container = self._create(
                spec, name, labels, environment, mounts, {"extra_hosts": HOST_GATEWAY}
            )
            container.start()
        except docker.errors.APIError as error:
            self._remove_spares([name])
            raise PluginUnavailable(
                f"Docker could not start a spare for {folder}: {_explain(error)}"
            ) from None
        log.info("spare %s waits in container %s", folder.name, container.short_id)

    def drop_spare(self, folder: Path) -> None:
        self._remove_spares([str(c.name) for c in self._spares(_identity_of(folder))])

    def drop_spares(self, keep: Sequence[Path]) -> list[str]:
        kept = set()
        for folder in keep:
            with contextlib.suppress(OSError):
                kept.add(_identity_of(folder))
        dropped = [
            str(container.name)
            for container in self._spares()
            if container.labels.get(LABEL_SPARE) not in kept
        ]
        self._remove_spares(dropped)
        return [f"spare container {name}" for name in dropped]

    def _take_spare(self, spec: LaunchSpec, image_id: str, mounts: list[Mount]) -> bool:
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
            found = self._spares(_identity_of(spec.run_folder))
            digest = self._digest(spec, image_id, mounts)
            for spare in found:
                if (
                    spec.network is NetworkMode.OPEN
                    and spare.labels.get(LABEL_SPARE_SPEC) == digest
                    and _state(spare) == "running"
                    and _tell(pipe, spec.clone_id)
                ):
                    try:
                        spare.rename(container_name(spec.clone_id))
                    except docker.errors.APIError as error:
                        self._remove_spares([str(spare.name)])
                        raise PluginUnavailable(
                            f"Docker could not name clone {spec.clone_id}'s container: "
                            f"{_explain(error)}"
                        ) from None
                    self._remove_spares([str(c.name) for c in found if c is not spare])
                    log.info("clone %s runs in spare container %s", spec.clone_id, spare.short_id)
                    return True
            self._remove_spares([str(c.name) for c in found])
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pipe)

    def _spares(self, identity: str | None = None) -> list[Container]:
        """The containers waiting for a clone (named as spares still), of one folder or all."""
        label = LABEL_SPARE if identity is None else f"{LABEL_SPARE}={identity}"
        return [c for c in self._labelled(label) if str(c.name).startswith(SPARE_PREFIX)]

    def _remove_spares(self, names: Sequence[str]) -> None:
        for name in names:
            container = self._container(name)
            if container is not None:
                _remove(container)

    def _digest(self, spec: LaunchSpec, image_id: str, mounts: list[Mount]) -> str:
        """All a container is made with but its clone, so a spare is taken up only by a
        launch that would make the same: the image's id (a tag may have moved), the
        variables, mounts (the secrets file's identity: a file replaced since is not the
        one mounted), limits and command."""
        secrets_file: object = None
        with contextlib.suppress(OSError):
            found = os.stat(spec.secrets_file)
            secrets_file = [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns]
        shared = [
            [m["Target"], m["Source"], m["Type"], m["ReadOnly"]]
            for m in mounts
            if m["Target"] != RUN_FOLDER
        ]
        command = self.command_for(spec) if self.command_for is not None else None
        made = {
            "image": image_id,
            "environment": sorted(self._environment(spec, spare=True).items()),
            "labels": sorted(
                (k, v) for k, v in spec.labels.items() if k not in (LABEL_CLONE, LABEL_TARGET)
            ),
            "mounts": shared,
            "secrets": secrets_file,
            "cpus": spec.cpus,
            "memory": spec.memory,
            "command": list(command) if command is not None else None,
            "owner": list(self.owner),
        }
        return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()

    def status(self, clone_id: str) -> CloneStatus:
        _check_id(clone_id)
        container = self._container(container_name(clone_id))
        return self._status(clone_id, container)

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        _check_id(clone_id)
        container = self._container(container_name(clone_id))
        if container is not None and _state(container) in _RUNNING_STATES:
            # Docker sends the stop signal to the init, which hands it on, and kills the
            # container when the grace time is over.
            timeout = max(0, math.ceil(grace_s))
            with contextlib.suppress(docker.errors.NotFound):
                container.stop(timeout=timeout)
            self._wait_not_running(container, clone_id)
        helper = self._container(proxy_name(clone_id))
        if helper is not None and _state(helper) in _RUNNING_STATES:
            with contextlib.suppress(docker.errors.NotFound):
                helper.stop(timeout=0)

    def remove(self, clone_id: str) -> None:
        _check_id(clone_id)
        self._remove_all(clone_id)

    def running(self) -> Sequence[CloneStatus]:
        found = []
        for clone_id, container in self._clones():
            status = self._status(clone_id, container)
            if status.state is not LaunchState.MISSING:
                found.append(status)
        return sorted(found, key=lambda status: status.clone_id)

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
            words = _explain(error) if isinstance(error, docker.errors.APIError) else str(error)
            raise PluginUnavailable(
                f"cannot run the image {self.image} ({one_line(words)}); build it with "
                "`shadowclone image build` (`--demo` for the demo's)"
            ) from None
        found = bytes(output).decode(errors="replace").split()
        if not found:
            raise PluginUnavailable("Docker gives containers no address of this machine")
        return found[0]

    def reap_strays(self) -> list[str]:
        """Remove what crashes left in this launcher's scope: containers of clones whose run
        folder is gone, containers created but never started, and egress proxies and their
        volumes whose clone container is gone. serve calls it at start, after taking up its
        clones; returns one line per thing removed."""
        removed: list[str] = []
        alive = set()
        for clone_id, container in self._clones():
            gone = not (self.clones_dir / clone_id).is_dir()
            if not gone and _state(container) != "created":
                alive.add(clone_id)
                continue
            why = "its run folder is gone" if gone else "it was never started"
            self._remove_all(clone_id)
            removed.append(f"container {container.name} ({why})")
            log.warning("removed container %s: %s", container.name, why)
        for helper in self._labelled(LABEL_PROXY_OF):
            if helper.labels.get(LABEL_PROXY_OF, "") not in alive:
                with contextlib.suppress(docker.errors.NotFound):
                    helper.remove(force=True)
                    removed.append(f"container {helper.name} (its clone is gone)")
        for volume in self._volumes():
            if (volume.attrs.get("Labels") or {}).get(LABEL_EGRESS_OF, "") not in alive:
                with contextlib.suppress(docker.errors.NotFound):
                    volume.remove(force=True)
                    removed.append(f"volume {volume.name} (its clone is gone)")
        return removed

    def traces(self, clone_id: str) -> list[str]:
        """Everything Docker still holds of one clone: containers and volumes."""
        left = []
        for name in (container_name(clone_id), proxy_name(clone_id)):
            container = self._container(name)
            if container is not None:
                left.append(f"container {name} ({_state(container)})")
        if self._volume(volume_name(clone_id)) is not None:
            left.append(f"volume {volume_name(clone_id)}")
        return left

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = docker.from_env(timeout=DOCKER_TIMEOUT_S)
            except docker.errors.DockerException as error:
                raise _unreachable(error) from None
        return self._client

    # ------------------------------------------------------------------ helpers

    def _identity(self) -> dict[str, Any]:
        """Root with the few capabilities the entry point hands on to the run program, and the
        in-memory folders that program owns."""
        uid, gid = self.owner
        tmpfs = {"/tmp": "mode=1777,exec"}
        if uid == 0:
            uid = gid = CLONE_UID
            tmpfs[PRIVATE] = "mode=0700,noexec"  # root's until the entry point fills it
        tmpfs[HOME] = f"uid={uid},gid={gid},mode=0700,exec"
        return {"user": "0:0", "cap_drop": ["ALL"], "cap_add": list(CAPABILITIES), "tmpfs": tmpfs}

    def _environment(self, spec: LaunchSpec, spare: bool = False) -> dict[str, str]:
        """The run program's variables; a spare's have no clone id (it is told it later)."""
        environment = {
            **{k: v for k, v in spec.env.items() if k != contract.CLONE_ID_VARIABLE},
            contract.RUN_FOLDER_VARIABLE: RUN_FOLDER,
            contract.SECRETS_VARIABLE: SECRETS_FILE,
            OWNER_VARIABLE: "{}:{}".format(*self.owner),
        }
        if not spare:
            environment[contract.CLONE_ID_VARIABLE] = spec.clone_id
        if spec.login_state is not None:
            environment[LOGIN_STATE_VARIABLE] = LOGIN_STATE
        if spec.caches:  # clone-entry hands a cache the image has no folder for to the engine
            environment["SHADOWCLONE_CACHES"] = ":".join(spec.caches.values())
        return environment

    def _create(
        self,
        spec: LaunchSpec,
        name: str,
        labels: dict[str, str],
        environment: dict[str, str],
        mounts: list[Mount],
        options: dict[str, Any],
    ) -> Container:
        command = self.command_for(spec) if self.command_for is not None else None
        container: Container = self.client.containers.create(
            spec.image,
            command=list(command) if command is not None else None,
            name=name,
            labels=labels,
            environment=environment,
            mounts=mounts,
            init=True,
            nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
            mem_limit=spec.memory,
            security_opt=["no-new-privileges:true"],
            hostname="clone",
            **self._identity(),
            **options,
        )
        return container

    def _mounts(self, spec: LaunchSpec) -> list[Mount]:
        mounts = [Mount(RUN_FOLDER, str(spec.run_folder.absolute()), type="bind")]
        if spec.secrets_file.exists():  # a missing file stays missing: the clone says so
            mounts.append(
                Mount(SECRETS_FILE, str(spec.secrets_file.absolute()), type="bind", read_only=True)
            )
        if spec.login_state is not None:
            mounts.append(Mount(LOGIN_STATE, str(self._login_state(spec.login_state)), type="bind"))
        # A new volume starts with what the image holds at its path (owner and mode too).
        mounts += [Mount(path, volume, type="volume") for volume, path in spec.caches.items()]
        return mounts

    def _login_state(self, folder: Path) -> Path:
        """The folder to mount as the login's state: the one serve made, or, for a root owner,
        a subfolder of it handed to the `clone` user (its parent stays root's 0700, so a host
        user with the clone's uid cannot reach it)."""
        folder = folder.absolute()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.owner[0] != 0:
            return folder
        inner = folder / f"uid-{CLONE_UID}"
        inner.mkdir(mode=0o700, exist_ok=True)
        os.chown(inner, CLONE_UID, CLONE_UID, follow_symlinks=False)
        return inner

    def _start_proxy(self, spec: LaunchSpec, token: str) -> None:
        """The egress proxy of a network-off clone, and the volume of its socket."""
        if not spec.model_host:
            raise Refused(
                f"clone {spec.clone_id} is network-off and its spec names no model host to reach"
            )
        self._remove_all(spec.clone_id, keep_clone=True)  # leftovers of a launch that died
        labels = {LABEL_SCOPE: self.scope}
        try:
            self.client.volumes.create(
                volume_name(spec.clone_id), labels={**labels, LABEL_EGRESS_OF: spec.clone_id}
            )
            helper = self.client.containers.create(
                spec.image,
                entrypoint=["python3", "-c", Path(proxy.__file__).read_text(encoding="utf-8")],
                command=[
                    *("--allow", spec.model_host),
                    *(("--allow", spec.auth_host) if spec.auth_host else ()),
                    *("--socket", EGRESS_SOCKET),
                ],
                environment={proxy.TOKEN_VARIABLE: token},
                name=proxy_name(spec.clone_id),
                labels={**labels, LABEL_PROXY_OF: spec.clone_id},
                mounts=[Mount(EGRESS_FOLDER, volume_name(spec.clone_id), type="volume")],
                extra_hosts=HOST_GATEWAY,
                init=True,
                user=f"{CLONE_UID}:{CLONE_UID}",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges:true"],
                read_only=True,
                mem_limit="256m",
            )
            helper.start()
        except docker.errors.APIError as error:
            self._remove_all(spec.clone_id, keep_clone=True)
            raise PluginUnavailable(
                f"Docker could not start the egress proxy of clone {spec.clone_id}: "
                f"{_explain(error)}"
            ) from None
        self._wait_proxy(helper, spec.clone_id)

    def _wait_proxy(self, helper: Container, clone_id: str) -> None:
        deadline = time.monotonic() + PROXY_READY_S
        while time.monotonic() < deadline:
            logs = helper.logs().decode("utf-8", errors="replace")
            if proxy.READY_LINE in logs:
                return
            helper.reload()
            if _state(helper) not in _RUNNING_STATES:
                break
            time.sleep(0.05)
        output = helper.logs(tail=TAIL_LINES).decode("utf-8", errors="replace").strip()
        self._remove_all(clone_id, keep_clone=True)
        raise PluginUnavailable(
            f"the egress proxy of clone {clone_id} did not start: {output or 'no output'}"
        )

    def _check_image(self, image: str) -> str:
        """The image is here, has an engine user, and the owner is not that user; its id."""
        try:
            found = self.client.images.get(image)
        except docker.errors.ImageNotFound:
            raise PluginUnavailable(
                f"the clone image {image} is not on this machine: build it with "
                f"`shadowclone image build`, or `docker pull {image}`"
            ) from None
        except docker.errors.DockerException as error:
            raise _unreachable(error) from None
        labels = (found.attrs.get("Config") or {}).get("Labels") or {}
        inside = labels.get(VERSION_LABEL)
        if inside and inside != CORE_VERSION:
            raise PluginUnavailable(
                f"the clone image {image} holds shadowclone {inside}, and this machine runs "
                f"{CORE_VERSION}: build it again with `shadowclone image build`"
            )
        engine = _engine_uid(found.attrs.get("Config") or {})
        if engine is None:
            raise PluginUnavailable(
                f"the clone image {image} has no engine user of its own (it predates them): "
                "build it again with `shadowclone image build`"
            )
        if engine == self.owner[0]:
            raise Refused(
                f"your uid {engine} is the clone image's engine user's; build the image with "
                "another (`docker build --build-arg ENGINE_UID=<a uid no owner has>` of "
                "image/Dockerfile)"
            )
        return str(found.id)

    def _container(self, name: str) -> Container | None:
        try:
            container = self.client.containers.get(name)
        except docker.errors.NotFound:
            return None
        except docker.errors.DockerException as error:
            raise _unreachable(error) from None
        if container.labels.get(LABEL_SCOPE) != self.scope:
            return None  # another shadowclone home's clone with the same id: not ours
        return container

    def _labelled(self, label: str) -> list[Container]:
        try:
            found: list[Container] = self.client.containers.list(
                all=True, filters={"label": [label, f"{LABEL_SCOPE}={self.scope}"]}
            )
        except docker.errors.NotFound:
            return []  # a container removed while it was being listed
        except docker.errors.DockerException as error:
            raise _unreachable(error) from None
        return found

    def _clones(self) -> Iterator[tuple[str, Container]]:
        """Every clone's container in this scope, with its clone's id: those made for it
        (labelled with it) and the spares that took one up (named after it)."""
        for container in self._labelled(LABEL_CLONE):
            yield container.labels.get(LABEL_CLONE, ""), container
        for container in self._labelled(LABEL_SPARE):
            name = str(container.name)
            if not name.startswith(SPARE_PREFIX) and name.startswith(CONTAINER_PREFIX):
                yield name.removeprefix(CONTAINER_PREFIX), container

    def _volumes(self) -> Iterator[Volume]:
        found: list[Volume] = self.client.volumes.list(
            filters={"label": [LABEL_EGRESS_OF, f"{LABEL_SCOPE}={self.scope}"]}
        )
        yield from found

    def _volume(self, name: str) -> Volume | None:
        try:
            volume = self.client.volumes.get(name)
        except docker.errors.NotFound:
            return None
        if (volume.attrs.get("Labels") or {}).get(LABEL_SCOPE) != self.scope:
            return None
        return volume

    def _status(self, clone_id: str, container: Container | None) -> CloneStatus:
        if container is None:
            return CloneStatus(clone_id, LaunchState.MISSING)
        state = _state(container)
        if state in _RUNNING_STATES:
            return CloneStatus(clone_id, LaunchState.RUNNING)
        if state not in _EXITED_STATES:
            return CloneStatus(clone_id, LaunchState.MISSING)  # created, never started
        info = container.attrs.get("State", {})
        tail = _logs(container)
        if info.get("OOMKilled"):
            limit = container.attrs.get("HostConfig", {}).get("Memory") or 0
            tail += f"\n(the clone ran out of memory: its limit is {limit // 2**20} MiB)"
        return CloneStatus(clone_id, LaunchState.EXITED, info.get("ExitCode"), tail.strip("\n"))

    def _wait_not_running(self, container: Container, clone_id: str) -> None:
        deadline = time.monotonic() + STOP_CHECK_S
        while True:
            try:
                container.reload()
            except docker.errors.NotFound:
                return
            if _state(container) not in _RUNNING_STATES:
                return
            if time.monotonic() > deadline:
                raise PluginUnavailable(f"clone {clone_id} is still running after docker stop")
            with contextlib.suppress(docker.errors.APIError):  # it may end meanwhile
                container.kill()
            time.sleep(0.1)

    def _remove_all(self, clone_id: str, keep_clone: bool = False) -> None:
        names = [proxy_name(clone_id)] if keep_clone else [container_name(clone_id)]
        if not keep_clone:
            names.append(proxy_name(clone_id))
        for name in names:
            container = self._container(name)
            if container is not None:
                _remove(container)
        volume = self._volume(volume_name(clone_id))
        if volume is not None:
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)


def _remove(container: Container) -> None:
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


def _engine_uid(config: dict[str, Any]) -> int | None:
    """The engine user's uid an image's configuration names, or None."""
    for item in config.get("Env") or []:
        name, _, value = str(item).partition("=")
        uid = value.partition(":")[0]
        if name == ENGINE_USER_VARIABLE and uid.isdigit():
            return int(uid)
    return None


def _identity_of(folder: Path) -> str:
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


def _state(container: Container) -> str:
    return str(container.attrs.get("State", {}).get("Status", "unknown"))


def _logs(container: Container) -> str:
    try:
        data: bytes = container.logs(stdout=True, stderr=True, tail=TAIL_LINES)
    except docker.errors.NotFound:
        return ""
    return data.decode("utf-8", errors="replace")


def _explain(error: docker.errors.APIError) -> str:
    return str(error.explanation or error)


def _unreachable(error: Exception) -> PluginUnavailable:
    return PluginUnavailable(
        f"cannot reach Docker ({error}); start Docker (Docker Desktop, or `sudo systemctl "
        "start docker` on Linux) and make sure this user may use it"
    )
