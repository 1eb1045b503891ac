"""A clone's secrets file as a swarm secret: made from the file's path by the docker CLI, so
shadowclone never opens it (the CLI reads it and sends it to the managers, which keep it
encrypted in their Raft log and hand it, on tmpfs, only to the node running the clone), and
removed with the clone."""

from __future__ import annotations

import contextlib
import os
import secrets as randomness
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import docker
import docker.errors
from docker.models.secrets import Secret
from shadowclone.plugin import PluginUnavailable, one_line
from shadowclone_docker_launch.names import LABEL_CLONE, LABEL_SCOPE

REMOVE_WAIT_S = 30.0
"""How long a removal waits for the clone's task to let go of its secret."""


class Secrets:
    """The swarm secrets of one clones folder's clones."""

    def __init__(self, client: docker.DockerClient, scope: str, manager: str | None) -> None:
        self.client = client
        self.scope = scope
        self.manager = manager

    def create(self, clone_id: str, path: Path, labels: Mapping[str, str]) -> Secret:
        docker_cli = shutil.which("docker")
        if docker_cli is None:
            raise PluginUnavailable("the swarm launcher needs the docker CLI to make secrets")
        name = f"shadowclone-{clone_id}-secrets-{randomness.token_hex(3)}"
        argv = [docker_cli, "secret", "create"]
        for key, value in {**labels, LABEL_CLONE: clone_id, LABEL_SCOPE: self.scope}.items():
            argv += ["--label", f"{key}={value}"]
        env = dict(os.environ)
        if self.manager:
            env["DOCKER_HOST"] = self.manager
        done = subprocess.run(
            [*argv, name, str(path.absolute())],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            said = one_line(done.stderr.strip() or done.stdout.strip() or "no message")
            raise PluginUnavailable(f"the swarm could not keep clone {clone_id}'s secrets: {said}")
        found: Secret = self.client.secrets.get(done.stdout.strip())
        return found

    def of(self, clone_id: str | None) -> list[Secret]:
        label = LABEL_CLONE if clone_id is None else f"{LABEL_CLONE}={clone_id}"
        found: list[Secret] = self.client.secrets.list(
            filters={"label": [label, f"{LABEL_SCOPE}={self.scope}"]}
        )
        return found

    def names(self, clone_id: str) -> list[str]:
        return sorted(str(secret.name) for secret in self.of(clone_id))

    def remove(self, clone_id: str) -> None:
        """Once no task holds them (a removed service's task ends a moment later)."""
        deadline = time.monotonic() + REMOVE_WAIT_S
        for secret in self.of(clone_id):
            while True:
                try:
                    secret.remove()
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError:
                    if time.monotonic() > deadline:
                        raise PluginUnavailable(
                            f"the swarm still uses clone {clone_id}'s secret {secret.name}"
                        ) from None
                    time.sleep(0.2)

    def reap(self, alive: set[str]) -> list[str]:
        removed = []
        for secret in self.of(None):
            clone_id = (secret.attrs.get("Spec", {}).get("Labels") or {}).get(LABEL_CLONE, "")
            if clone_id in alive:
                continue
            with contextlib.suppress(docker.errors.APIError):
                secret.remove()
                removed.append(f"secret {secret.name} (its clone is gone)")
        return removed
