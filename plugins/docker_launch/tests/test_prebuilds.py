"""Prebuilt images, made by the real run program in the real clone image from a repository's
cache: what the commands made is kept with the image's own settings; a clone starts from the
newest made while a newer one is made; a failing prebuild is said once and not tried again."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from shadowclone.node.lifecycle import Lifecycle
from shadowclone.plugin import Environment, contract

from shadowclone_docker_launch.launcher import LABEL_SCOPE, DockerLauncher
from shadowclone_docker_launch.prebuilds import (
    KEEP,
    LABEL_COMMIT,
    LABEL_PREBUILD,
    LABEL_PREBUILT_OF,
    PrebuildError,
    Prebuilds,
    mirror_head,
)

MEET = "touch {mine}; for i in $(seq 200); do [ -f {other} ] && exit 0; sleep 0.05; done; exit 7"
"""Makes its file, then waits up to 10 s for the other's: ends well only beside the other."""
LIFECYCLE = Lifecycle(
    on_create=(
        "mkdir -p deps && cp deps.lock deps/installed && echo warm > $HOME/warm",
        MEET.format(mine=".one", other=".two"),
        MEET.format(mine=".two", other=".one"),
    ),
    update_content=("echo updated >> deps/installed",),
    post_create=("never run by a prebuild > /dev/null",),
    names={"onCreateCommand": ("deps", "one", "two")},  # named: run in parallel
)


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=o", "-c", "user.email=o@e", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit(work: Path, cache: Path, lock: str) -> str:
    """A new commit of the default branch, pushed to the cache's mirror; its id."""
    (work / "deps.lock").write_text(lock)
    git(work, "add", "-A")
    git(work, "commit", "-qm", f"lock {lock.strip()}")
    git(work, "push", "-q", str(cache / contract.REPO_CACHE_MIRROR), "main")
    return git(work, "rev-parse", "HEAD")


@pytest.fixture
def cache(tmp_path: Path) -> tuple[Path, Path]:
    """A filled repository cache (as run/repocache.py leaves it) and a work tree that pushes
    to its mirror."""
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README.md").write_text("# app\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "start")
    cache.mkdir()
    git(cache, "clone", "-q", "--bare", str(work), contract.REPO_CACHE_MIRROR)
    (cache / contract.REPO_CACHE_MIRROR / contract.REPO_CACHE_COMPLETE).write_bytes(b"")
    cache.chmod(0o755)
    return cache, work


@pytest.fixture
def environment_tag(client: docker.DockerClient, image: str) -> Iterator[str]:
    """The clone image under an environment image's name of the test's own."""
    tag = f"shadowclone-env/test-{uuid.uuid4().hex[:8]}:env"
    client.images.get(image).tag(tag)
    yield tag
    made = client.images.list(filters={"label": f"{LABEL_PREBUILT_OF}={tag}"})
    for found in [*(str(i.id) for i in made), tag]:
        try:
            client.images.remove(found, force=True)
        except docker.errors.ImageNotFound:
            continue


def files_in(client: docker.DockerClient, tag: str) -> str:
    output: bytes = client.containers.run(
        tag,
        entrypoint=["/bin/sh", "-c"],
        command=["cat /clone/prebuilt/workspace/deps/installed /clone/prebuilt/home/warm"],
        remove=True,
    )
    return output.decode()


def test_a_prebuild_keeps_what_the_commands_made_and_the_images_settings(
    client: docker.DockerClient, environment_tag: str, cache: tuple[Path, Path]
) -> None:
    folder, work = cache
    head = commit(work, folder, "left-pad==1.3\n")
    assert mirror_head(folder) == head
    keeper = Prebuilds(lambda: client, "bridge")
    environment = Environment(source=".devcontainer/devcontainer.json", lifecycle=LIFECYCLE)
    tag = keeper.build(environment, environment_tag, folder, head)
    assert files_in(client, tag) == "left-pad==1.3\nupdated\nwarm\n"
    made, base = client.images.get(tag).attrs["Config"], client.images.get(environment_tag)
    for key in ("Entrypoint", "Cmd", "User", "Env"):
        assert made[key] == base.attrs["Config"][key], key
    assert made["Labels"][LABEL_COMMIT] == head
    said: list[str] = []
    assert keeper.choose(environment, environment_tag, folder, said.append) == tag
    assert said == [f"starting from the prebuilt image of {head[:12]} ({tag})"]


def test_a_newer_commit_is_prebuilt_in_the_background_and_older_ones_go(
    client: docker.DockerClient, environment_tag: str, cache: tuple[Path, Path]
) -> None:
    folder, work = cache
    keeper = Prebuilds(lambda: client, "bridge")
    environment = Environment(source=".devcontainer/devcontainer.json", lifecycle=LIFECYCLE)
    said: list[str] = []
    # Nothing made yet: the environment image, and a prebuild starts.
    first = commit(work, folder, "one\n")
    assert keeper.choose(environment, environment_tag, folder, said.append) == environment_tag
    tags = [wait_for_prebuilt(client, environment_tag, first)]
    for lock in ("two\n", "three\n"):
        head = commit(work, folder, lock)
        # The newest made so far at once, while the newer one is made.
        started_from = keeper.choose(environment, environment_tag, folder, said.append)
        assert started_from == tags[-1]
        tags.append(wait_for_prebuilt(client, environment_tag, head))
        assert files_in(client, tags[-1]).startswith(lock)
    left = client.images.list(filters={"label": f"{LABEL_PREBUILT_OF}={environment_tag}"})
    assert sorted(t for i in left for t in i.tags) == sorted(tags[-KEEP:])


def test_a_failing_prebuild_is_said_once_and_not_tried_again(
    client: docker.DockerClient, environment_tag: str, cache: tuple[Path, Path]
) -> None:
    folder, work = cache
    head = commit(work, folder, "one\n")
    broken = Lifecycle(on_create=("echo about to fail; exit 7",))
    environment = Environment(source=".devcontainer/devcontainer.json", lifecycle=broken)
    keeper = Prebuilds(lambda: client, "bridge")
    with pytest.raises(PrebuildError, match=r"onCreateCommand `echo about to fail; exit 7` exi"):
        keeper.build(environment, environment_tag, folder, head)
    for _ in range(3):
        assert keeper.choose(environment, environment_tag, folder, lambda _: None) == (
            environment_tag
        )
        wait_until_idle(keeper)
    assert len(keeper.failed) == 1
    assert not client.images.list(filters={"label": f"{LABEL_PREBUILT_OF}={environment_tag}"})
    assert not client.containers.list(all=True, filters={"label": "shadowclone.prebuild-of"})


def wait_for_prebuilt(client: docker.DockerClient, environment_tag: str, head: str) -> str:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        labels = [f"{LABEL_PREBUILT_OF}={environment_tag}", f"{LABEL_COMMIT}={head}"]
        made = client.images.list(filters={"label": labels})
        if made:
            return str(made[0].tags[0])
        time.sleep(0.2)
    pytest.fail(f"no prebuilt image of {head[:12]} within 300 s")


def wait_until_idle(keeper: Prebuilds) -> None:
    deadline = time.monotonic() + 300
    while keeper.busy() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not keeper.busy()


def test_a_prebuild_an_earlier_serve_left_is_removed_at_the_next_start(
    client: docker.DockerClient, image: str, tmp_path: Path
) -> None:
    launcher = DockerLauncher(tmp_path / "clones", client=client)
    left = client.containers.run(
        image,
        entrypoint=["sleep", "300"],
        command=[],
        name=f"shadowclone-prebuild-test-{uuid.uuid4().hex[:8]}",
        labels={LABEL_PREBUILD: "shadowclone-env/x:pre-1", LABEL_SCOPE: launcher.scope},
        detach=True,
    )
    other = DockerLauncher(tmp_path / "other-clones", client=client)
    assert other.reap_strays() == []  # another home's prebuilds are not its own
    assert launcher.reap_strays() == [f"container {left.name} (a prebuild no serve finishes)"]
    with pytest.raises(docker.errors.NotFound):
        left.reload()
