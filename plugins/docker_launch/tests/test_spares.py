"""Spares: a clone's container started ahead, in a spare folder, waits without running or
reading anything until a launch of the same spec names its clone; a launch of any other spec
removes it and starts the clone as usual (the launcher contract runs through spares in
test_launcher.py)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import docker
import pytest
from shadowclone.plugin import CloneStatus, LaunchSpec, LaunchState

from shadowclone_docker_launch.launcher import (
    CLONE_UID,
    LABEL_CLONE,
    LABEL_SPARE,
    SPARE_PIPE,
    DockerLauncher,
    container_name,
)

WAIT_S = 60.0
OWNER = (4242, 4242)
REPORT = (
    'echo "clone=$SHADOWCLONE_CLONE_ID uid=$(id -u)"; cat "$SHADOWCLONE_RUN_FOLDER/request.json"'
)


@pytest.fixture
def launcher(client: docker.DockerClient, image: str, tmp_path: Path) -> Iterator[DockerLauncher]:
    launcher = DockerLauncher(
        tmp_path / "clones", image, client=client, command_for=lambda _: ["sh", "-c", REPORT]
    )
    yield launcher
    launcher.drop_spares([])
    for status in launcher.running():
        launcher.remove(status.clone_id)


def spare_spec(launcher: DockerLauncher, image: str, name: str = "kind.1") -> LaunchSpec:
    folder = launcher.clones_dir / ".spares" / name
    folder.mkdir(parents=True)
    secrets = launcher.clones_dir.parent / "secrets.toml"
    if not secrets.exists():
        secrets.write_text('github_token = "ghp_spare"\n', encoding="utf-8")
        secrets.chmod(0o600)
    if launcher.owner[0] != 0:
        for path in (folder, secrets):
            os.chown(path, *launcher.owner)
    return LaunchSpec(name, folder, secrets, image, cpus=1.0, memory="1g")


def take(launcher: DockerLauncher, spare: LaunchSpec, number: int) -> LaunchSpec:
    """What `start` does: the spare becomes a run folder, its request written in it."""
    clone_id = f"261204-0000{number:02d}-spar"
    folder = launcher.clones_dir / clone_id
    spare.run_folder.rename(folder)
    request = folder / "request.json"
    request.write_text(f'{{"id": "{clone_id}"}}\n', encoding="utf-8")
    if launcher.owner[0] != 0:
        os.chown(request, *launcher.owner)
    return attrs.evolve(spare, clone_id=clone_id, run_folder=folder, labels={LABEL_CLONE: "x"})


def waiting(launcher: DockerLauncher) -> list[str]:
    """The spares' states, as Docker says."""
    return [str(c.status) for c in launcher._spares()]


def ended(launcher: DockerLauncher, clone_id: str) -> CloneStatus:
    deadline = time.monotonic() + WAIT_S
    while (status := launcher.status(clone_id)).state is LaunchState.RUNNING:
        assert time.monotonic() < deadline, f"clone {clone_id} did not end"
        time.sleep(0.1)
    return status


@pytest.mark.parametrize("owner", [(0, 0), OWNER], ids=["root-owner", "ordinary-owner"])
def test_a_spare_runs_and_reads_nothing_until_a_launch_names_its_clone(
    launcher: DockerLauncher, image: str, owner: tuple[int, int]
) -> None:
    launcher.owner = owner
    spare = spare_spec(launcher, image)
    launcher.keep_spare(spare)
    assert waiting(launcher) == ["running"]
    (container,) = launcher._spares()
    time.sleep(0.5)  # what it would run on its own, it has started by now
    commands = [row[-1] for row in container.top()["Processes"]]
    waits = ("/sbin/docker-init -- ", "/bin/sh /usr/local/bin/clone-entry ", "head -n 1 ")
    assert all(c.startswith(waits) for c in commands), commands
    assert f"head -n 1 /clone/run/{SPARE_PIPE}" in commands, commands
    environment = container.attrs["Config"]["Env"]
    assert not any(v.startswith("SHADOWCLONE_CLONE_ID=") for v in environment)
    if owner[0] == 0:  # the secrets' private copy is made only for the clone
        listed = container.exec_run(["ls", "-A", "/run/clone"]).output
        assert isinstance(listed, bytes) and listed.strip() == b""

    spec = take(launcher, spare, 1)
    launcher.launch(spec)
    taken = launcher.client.containers.get(container_name(spec.clone_id))
    assert taken.id == container.id and LABEL_SPARE in taken.labels
    assert launcher.status(spec.clone_id).state in (LaunchState.RUNNING, LaunchState.EXITED)
    assert {s.clone_id for s in launcher.running()} == {spec.clone_id}
    status = ended(launcher, spec.clone_id)
    assert status.exit_code == 0, status.output_tail
    uid = owner[0] if owner[0] else CLONE_UID
    assert f"clone={spec.clone_id} uid={uid}" in status.output_tail
    assert f'{{"id": "{spec.clone_id}"}}' in status.output_tail
    assert not (spec.run_folder / SPARE_PIPE).exists()
    assert waiting(launcher) == []
    launcher.remove(spec.clone_id)
    assert launcher.traces(spec.clone_id) == []


def _new_secrets(spec: LaunchSpec) -> LaunchSpec:
    replaced = spec.secrets_file.with_suffix(".new")
    replaced.write_bytes(spec.secrets_file.read_bytes())
    replaced.chmod(0o600)
    replaced.replace(spec.secrets_file)  # the spare's mount still shows the old file
    return spec


CHANGES: dict[str, Callable[[LaunchSpec], LaunchSpec]] = {
    "secrets-replaced": _new_secrets,
    "cpus": lambda spec: attrs.evolve(spec, cpus=0.5),
    "memory": lambda spec: attrs.evolve(spec, memory="512m"),
    "variables": lambda spec: attrs.evolve(spec, env={"SOMETHING": "else"}),
    "login-state": lambda spec: attrs.evolve(spec, login_state=spec.run_folder.parent / "login"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_spare_made_for_another_spec_is_removed_and_the_clone_starts_as_usual(
    launcher: DockerLauncher, image: str, change: str
) -> None:
    spare = spare_spec(launcher, image)
    launcher.keep_spare(spare)
    spec = CHANGES[change](take(launcher, spare, 2))
    launcher.launch(spec)
    container = launcher.client.containers.get(container_name(spec.clone_id))
    assert LABEL_SPARE not in container.labels, "a container of its own"
    assert container.labels[LABEL_CLONE] == spec.clone_id
    assert waiting(launcher) == [], "the spare is removed"
    assert not (spec.run_folder / SPARE_PIPE).exists()
    status = ended(launcher, spec.clone_id)
    assert status.exit_code == 0 and f"clone={spec.clone_id}" in status.output_tail


def test_a_spare_that_died_is_not_taken(launcher: DockerLauncher, image: str) -> None:
    spare = spare_spec(launcher, image)
    launcher.keep_spare(spare)
    (container,) = launcher._spares()
    container.kill()
    spec = take(launcher, spare, 3)
    launcher.launch(spec)
    assert LABEL_SPARE not in launcher.client.containers.get(container_name(spec.clone_id)).labels
    assert waiting(launcher) == []
    assert ended(launcher, spec.clone_id).exit_code == 0


def test_a_spare_told_no_clone_id_ends_without_running_anything(
    launcher: DockerLauncher, image: str
) -> None:
    spare = spare_spec(launcher, image)
    launcher.keep_spare(spare)
    (container,) = launcher._spares()
    with (spare.run_folder / SPARE_PIPE).open("w") as pipe:
        pipe.write("../../x; touch /clone/run/ran\n")
    container.wait(timeout=WAIT_S)
    container.reload()
    assert container.attrs["State"]["ExitCode"] == 70
    assert b"named no clone" in container.logs()
    assert not (spare.run_folder / "ran").exists()


def test_spares_are_dropped_but_those_in_the_folders_kept(
    launcher: DockerLauncher, image: str
) -> None:
    specs = [spare_spec(launcher, image, f"kind.{n}") for n in range(3)]
    for spec in specs:
        launcher.keep_spare(spec)
    assert waiting(launcher) == ["running"] * 3
    launcher.drop_spare(specs[0].run_folder)
    assert len(waiting(launcher)) == 2
    kept = take(launcher, specs[1], 4)  # renamed: still its spare's folder
    assert launcher.drop_spares([kept.run_folder]) == [
        f"spare container shadowclone-spare-{specs[2].clone_id}"
    ]
    assert waiting(launcher) == ["running"]
    launcher.launch(kept)
    assert ended(launcher, kept.clone_id).exit_code == 0
    assert LABEL_SPARE in launcher.client.containers.get(container_name(kept.clone_id)).labels


def test_the_reaper_removes_a_clone_in_a_spare_whose_run_folder_is_gone(
    launcher: DockerLauncher, image: str
) -> None:
    launcher.command_for = lambda _: ["sleep", "60"]
    spare = spare_spec(launcher, image)
    launcher.keep_spare(spare)
    spec = take(launcher, spare, 5)
    launcher.launch(spec)
    fresh = DockerLauncher(launcher.clones_dir, image, client=launcher.client)
    assert [s.clone_id for s in fresh.running()] == [spec.clone_id], "found by its name"
    assert fresh.reap_strays() == [], "its run folder is there: it is left alone"
    shutil.rmtree(spec.run_folder)
    assert fresh.reap_strays() == [
        f"container {container_name(spec.clone_id)} (its run folder is gone)"
    ]
    assert launcher.traces(spec.clone_id) == []
