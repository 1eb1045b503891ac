"""How a clone's container is made: its user and capabilities, variables, mounts and limits.

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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import docker
from docker.models.containers import Container
from docker.types import Mount
from shadowclone.plugin import LaunchSpec, contract

from shadowclone_docker_launch.names import (
    CAPABILITIES,
    CLONE_UID,
    HOME,
    LABEL_CLONE,
    LABEL_TARGET,
    LOGIN_STATE,
    LOGIN_STATE_VARIABLE,
    OWNER_VARIABLE,
    PRIVATE,
    REPO_CACHE,
    RUN_FOLDER,
    SECRETS_FILE,
)

CommandFor = Callable[[LaunchSpec], Sequence[str] | None]
"""What a clone runs instead of the image's command (tests play scripts); None: the image's."""


@attrs.frozen
class Recipe:
    """What a container is made with besides its spec. The launcher makes one from its
    settings at each use, so a setting changed on the launcher holds for the next container."""

    owner: tuple[int, int]
    """The uid and gid whose files the clones use."""
    command_for: CommandFor | None

    def command(self, spec: LaunchSpec) -> list[str] | None:
        command = self.command_for(spec) if self.command_for is not None else None
        return list(command) if command is not None else None

    def identity(self) -> dict[str, Any]:
        """Root with the few capabilities the entry point hands on to the run program, and the
        in-memory folders that program owns."""
        uid, gid = self.owner
        tmpfs = {"/tmp": "mode=1777,exec"}
        if uid == 0:
            uid = gid = CLONE_UID
            tmpfs[PRIVATE] = "mode=0700,noexec"  # root's until the entry point fills it
        tmpfs[HOME] = f"uid={uid},gid={gid},mode=0700,exec"
        return {"user": "0:0", "cap_drop": ["ALL"], "cap_add": list(CAPABILITIES), "tmpfs": tmpfs}

    def environment(self, spec: LaunchSpec, spare: bool = False) -> dict[str, str]:
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
        if spec.repo_cache is not None:
            environment[contract.REPO_CACHE_VARIABLE] = REPO_CACHE
        if spec.caches:  # clone-entry hands a cache the image has no folder for to the engine
            environment["SHADOWCLONE_CACHES"] = ":".join(spec.caches.values())
        return environment

    def mounts(self, spec: LaunchSpec) -> list[Mount]:
        mounts = [Mount(RUN_FOLDER, str(spec.run_folder.absolute()), type="bind")]
        if spec.secrets_file.exists():  # a missing file stays missing: the clone says so
            mounts.append(
                Mount(SECRETS_FILE, str(spec.secrets_file.absolute()), type="bind", read_only=True)
            )
        if spec.login_state is not None:
            mounts.append(Mount(LOGIN_STATE, str(self.login_state(spec.login_state)), type="bind"))
        if spec.repo_cache is not None:
            mounts.append(Mount(REPO_CACHE, str(self.repo_cache(spec.repo_cache)), type="bind"))
        # A new volume starts with what the image holds at its path (owner and mode too).
        mounts += [Mount(path, volume, type="volume") for volume, path in spec.caches.items()]
        return mounts

    def repo_cache(self, folder: Path) -> Path:
        """The folder to mount as the repository's cache: the run program's to write, the
        engine's user's to read (0755), never to write."""
        return self._run_programs(folder, 0o755)

    def login_state(self, folder: Path) -> Path:
        """The folder to mount as the login's state: the run program's alone (0700), so a
        host user with the clone's uid cannot reach it either."""
        return self._run_programs(folder, 0o700)

    def _run_programs(self, folder: Path, mode: int) -> Path:
        """`folder`, which serve made, as the run program's: for a root owner a subfolder of
        it handed to the `clone` user, the run program's (its parent stays root's)."""
        folder = folder.absolute()
        folder.mkdir(mode=mode, parents=True, exist_ok=True)
        if self.owner[0] != 0:
            return folder
        inner = folder / f"uid-{CLONE_UID}"
        inner.mkdir(mode=mode, exist_ok=True)
        os.chown(inner, CLONE_UID, CLONE_UID, follow_symlinks=False)
        return inner

    def create(
        self,
        client: docker.DockerClient,
        spec: LaunchSpec,
        name: str,
        labels: dict[str, str],
        environment: dict[str, str],
        mounts: list[Mount],
        options: dict[str, Any],
    ) -> Container:
        container: Container = client.containers.create(
            spec.image,
            command=self.command(spec),
            name=name,
            labels=labels,
            environment=environment,
            mounts=mounts,
            init=True,
            nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
            mem_limit=spec.memory,
            security_opt=["no-new-privileges:true"],
            hostname="clone",
            **self.identity(),
            **options,
        )
        return container

    def digest(self, spec: LaunchSpec, image_id: str, mounts: list[Mount]) -> str:
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
        made = {
            "image": image_id,
            "environment": sorted(self.environment(spec, spare=True).items()),
            "labels": sorted(
                (k, v) for k, v in spec.labels.items() if k not in (LABEL_CLONE, LABEL_TARGET)
            ),
            "mounts": shared,
            "secrets": secrets_file,
            "cpus": spec.cpus,
            "memory": spec.memory,
            "command": self.command(spec),
            "owner": list(self.owner),
        }
        return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()
