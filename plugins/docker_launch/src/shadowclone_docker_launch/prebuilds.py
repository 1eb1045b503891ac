"""Prebuilt images: a repository's environment image with what its `onCreateCommand` and
`updateContentCommand` made on its default branch, made once per commit of that branch, as the
Dev Container specification's prebuilds are, so that a clone runs only the commands after them.

The launcher makes them in the background (serve's process, a thread of its own) from the
repository's cache, which a clone's run program keeps up to date: a container of the
environment image, the network on and no secret, runs the run program's prebuild
(`python -m shadowclone.run.prebuild`) on the mirror's default branch, and is committed with
the environment image's own settings. Only the default branch is ever prebuilt, with the
commands of the default branch's configuration: nothing a pull request brings runs here.

`choose` gives a launch the image to start from at once: the prebuilt image of the mirror's
default branch if it is made; else the newest one of the same environment and commands (its
commit older: the clone's own checkout has the newer files, and only what the commands made is
taken from the image), while the new one is made; else the environment image itself, and the
clone runs every command.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import Mount
from shadowclone.plugin import Environment, PrebuildSpec, contract

from shadowclone_docker_launch.builds import image_id
from shadowclone_docker_launch.names import LABEL_SCOPE, REPO_CACHE

log = logging.getLogger(__name__)

LABEL_PREBUILT_OF = "io.shadowclone.prebuilt-of"
"""On a prebuilt image: the environment image's tag it was made on."""
LABEL_COMMANDS = "io.shadowclone.prebuilt-commands"
"""On a prebuilt image: the digest of the commands it ran (`Lifecycle.prebuild_digest`)."""
LABEL_COMMIT = "io.shadowclone.prebuilt-commit"
LABEL_PREBUILD = "shadowclone.prebuild-of"
"""On a prebuild's container: the prebuilt image it makes."""
PREBUILD_TIMEOUT_S = 60 * 60.0
MIRROR_WAIT_S = 30 * 60.0
"""How long a prebuild waits for the repository's cache to be filled by a first clone."""
MIRROR_POLL_S = 1.0
PREBUILD_CAPABILITIES = ("CHOWN", "SETUID", "SETGID", "DAC_OVERRIDE", "FOWNER")
"""The prebuild starts the commands as the engine's user (which drops them all) and moves
what they made: root's powers over files, nothing else."""
KEEP = 2
"""Prebuilt images kept of one environment and its commands: the newest, and the one before
(a clone may still be starting from it)."""

Say = Callable[[str], None]


def prebuilt_tag(environment_tag: str, digest: str, commit: str) -> str:
    name = environment_tag.partition(":")[0]
    made_of = hashlib.sha256(f"{environment_tag}\0{digest}\0{commit}".encode()).hexdigest()
    return f"{name}:pre-{made_of[:24]}"


def mirror_head(cache: Path) -> str | None:
    """The commit of the default branch in a filled repository cache, or None."""
    mirror = cache / contract.REPO_CACHE_MIRROR
    if not (mirror / contract.REPO_CACHE_COMPLETE).is_file():
        return None
    git = shutil.which("git")
    if git is None:
        return None
    settings = ["-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null"]
    done = subprocess.run(
        [git, *settings, "--git-dir", str(mirror), "rev-parse", "--verify", "-q", "HEAD^{commit}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    head = done.stdout.strip()
    return head if done.returncode == 0 and len(head) == 40 else None


class Prebuilds:
    """The prebuilt images of one launcher's clones, and the builds under way."""

    def __init__(
        self, client: Callable[[], docker.DockerClient], network: str | None, scope: str = ""
    ) -> None:
        self._client = client
        self.network = network
        self.scope = scope
        """The launcher's scope label, on each prebuild's container: a serve that starts
        removes those an earlier one left (`DockerLauncher.reap_strays`)."""
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        """Environment tags with a prebuild waiting or under way: one at a time each."""
        self.failed: dict[str, str] = {}
        """Prebuilt tags whose build failed, with why: not tried again by this process."""

    def choose(
        self, environment: Environment, environment_tag: str, cache: Path | None, say: Say
    ) -> str:
        """The image a clone starts from (see the module's docstring); a prebuild is started
        in the background when the newest is not made."""
        lifecycle = environment.lifecycle
        if not lifecycle.prebuilt() or cache is None:
            return environment_tag
        digest = lifecycle.prebuild_digest()
        head = mirror_head(cache)
        if head is not None:
            tag = prebuilt_tag(environment_tag, digest, head)
            if image_id(tag) is not None:
                say(f"starting from the prebuilt image of {head[:12]} ({tag})")
                return tag
        self.start(environment, environment_tag, cache)
        older = self.newest(environment_tag, digest)
        if older is not None:
            tag, commit = older
            say(f"starting from the prebuilt image of {commit[:12]} ({tag}); a newer is made")
            return tag
        return environment_tag

    def newest(self, environment_tag: str, digest: str) -> tuple[str, str] | None:
        """The newest prebuilt image of this environment and commands: its tag and commit."""
        return newest_prebuilt(environment_tag, digest, self._client())

    def _made(self, environment_tag: str, digest: str) -> list[Any]:
        return made_prebuilt(environment_tag, digest, self._client())

    def start(self, environment: Environment, environment_tag: str, cache: Path) -> bool:
        """Start a prebuild of the cache's default branch on a thread, unless one of this
        environment is under way; False then."""
        with self._lock:
            if environment_tag in self._busy:
                return False
            self._busy.add(environment_tag)
        thread = threading.Thread(
            target=self._build_in_background,
            args=(environment, environment_tag, cache),
            name=f"prebuild {environment_tag}",
            daemon=True,
        )
        thread.start()
        return True

    def _build_in_background(
        self, environment: Environment, environment_tag: str, cache: Path
    ) -> None:
        try:
            head = self._wait_for_mirror(cache)
            if head is None:
                log.info("no prebuild of %s: its repository's cache was not filled", cache)
                return
            tag = prebuilt_tag(environment_tag, environment.lifecycle.prebuild_digest(), head)
            if image_id(tag) is not None or tag in self.failed:
                return
            try:
                self.build(environment, environment_tag, cache, head)
            except PrebuildError as error:
                log.warning("%s", error)
        except Exception:
            log.exception("the prebuild of %s failed", environment_tag)
        finally:
            with self._lock:
                self._busy.discard(environment_tag)

    def busy(self) -> bool:
        """Whether a prebuild is waiting or under way."""
        with self._lock:
            return bool(self._busy)

    @staticmethod
    def _wait_for_mirror(cache: Path) -> str | None:
        deadline = time.monotonic() + MIRROR_WAIT_S
        while time.monotonic() < deadline:
            head = mirror_head(cache)
            if head is not None:
                return head
            time.sleep(MIRROR_POLL_S)
        return None

    def build(self, environment: Environment, environment_tag: str, cache: Path, head: str) -> str:
        """Make the prebuilt image of `head` (see the module's docstring); its tag. One that
        fails is remembered (`failed`): this process does not try it again."""
        try:
            return self._build(environment, environment_tag, cache, head)
        except PrebuildError as error:
            self.failed[
                prebuilt_tag(environment_tag, environment.lifecycle.prebuild_digest(), head)
            ] = str(error)
            raise

    def _build(self, environment: Environment, environment_tag: str, cache: Path, head: str) -> str:
        lifecycle = environment.lifecycle
        digest = lifecycle.prebuild_digest()
        tag = prebuilt_tag(environment_tag, digest, head)
        client = self._client()
        name = f"shadowclone-prebuild-{tag.rpartition(':pre-')[2]}"
        _remove(client, name)  # left by a serve that died during it
        base = client.images.get(environment_tag)
        started = time.monotonic()
        container = client.containers.run(
            environment_tag,
            entrypoint=["/opt/shadowclone/bin/python", "-m", "shadowclone.run.prebuild"],
            # An argument, not a variable: a commit keeps the container's variables.
            command=[PrebuildSpec(head, lifecycle).to_json()],
            name=name,
            labels={LABEL_PREBUILD: tag, LABEL_SCOPE: self.scope},
            mounts=[Mount(REPO_CACHE, str(cache.absolute()), type="bind", read_only=True)],
            user="0:0",
            cap_drop=["ALL"],
            cap_add=list(PREBUILD_CAPABILITIES),
            security_opt=["no-new-privileges:true"],
            tmpfs={"/tmp": "mode=1777,exec"},
            network_mode=self.network or "bridge",
            detach=True,
        )
        try:
            result = container.wait(timeout=PREBUILD_TIMEOUT_S)
            output = container.logs().decode("utf-8", "replace").strip().splitlines()
            if result.get("StatusCode") != 0:
                said = output[-1] if output else "no output"
                raise PrebuildError(f"the prebuild of {head[:12]} for {environment_tag}: {said}")
            config = base.attrs.get("Config") or {}
            labels = {
                **(config.get("Labels") or {}),
                LABEL_PREBUILT_OF: environment_tag,
                LABEL_COMMANDS: digest,
                LABEL_COMMIT: head,
            }
            name_part, _, version = tag.partition(":")
            container.commit(
                repository=name_part,
                tag=version,
                conf={
                    "Entrypoint": config.get("Entrypoint"),
                    "Cmd": config.get("Cmd"),
                    "User": config.get("User") or "",
                    "WorkingDir": config.get("WorkingDir") or "",
                    "Env": config.get("Env") or [],
                    "Labels": labels,
                },
            )
        except (docker.errors.DockerException, OSError) as error:
            what = f"the prebuild of {head[:12]} for {environment_tag}"
            raise PrebuildError(f"{what}: {error}") from None
        finally:
            _remove(client, name)
        log.info("prebuilt %s in %.1f s", tag, time.monotonic() - started)
        self._drop_old(environment_tag, digest)
        return tag

    def _drop_old(self, environment_tag: str, digest: str) -> None:
        for image in self._made(environment_tag, digest)[KEEP:]:
            try:
                self._client().images.remove(image.id)
            except docker.errors.DockerException as error:  # in use: the next prebuild tries
                log.info("prebuilt image %s stays: %s", image.id[:19], error)


def made_prebuilt(
    environment_tag: str, digest: str, client: docker.DockerClient | None = None
) -> list[Any]:
    """The prebuilt images of this environment and commands, newest first."""
    labels = [f"{LABEL_PREBUILT_OF}={environment_tag}", f"{LABEL_COMMANDS}={digest}"]
    try:
        client = client or docker.from_env()
        images = client.images.list(filters={"label": labels})
    except docker.errors.DockerException as error:
        log.warning("cannot list the prebuilt images of %s: %s", environment_tag, error)
        return []
    return sorted(images, key=lambda i: str(i.attrs.get("Created", "")), reverse=True)


def newest_prebuilt(
    environment_tag: str, digest: str, client: docker.DockerClient | None = None
) -> tuple[str, str] | None:
    """The newest prebuilt image of this environment and commands: its tag and commit."""
    for image in made_prebuilt(environment_tag, digest, client):
        tags = [t for t in image.tags if ":pre-" in t]
        if tags:
            return tags[0], str(image.labels.get(LABEL_COMMIT, ""))
    return None


class PrebuildError(Exception):
    """A prebuild failed; one line says why."""


def _remove(client: docker.DockerClient, name: str) -> None:
    try:
        client.containers.get(name).remove(force=True)
    except docker.errors.NotFound:
        return
    except docker.errors.DockerException as error:
        log.warning("cannot remove %s: %s", name, error)
