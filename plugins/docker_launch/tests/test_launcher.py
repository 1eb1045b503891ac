"""The Docker launcher passes the launcher contract in real containers of the clone image, and
keeps what it promises beyond it: read-only secrets that never show in the container's
environment, a run program that is not root and keeps only the capabilities it needs to start
the engine as another user (tests/docker/test_identities.py tries that user), limits, and no
Docker socket."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import docker
import pytest
from shadowclone import __version__ as shadowclone_version
from shadowclone.plugin import (
    CloneStatus,
    Launcher,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    PluginUnavailable,
)
from shadowclone_testing.containers import IMAGE, clone_image, docker_client
from shadowclone_testing.suites.launcher import (
    SCRIPT_FILE,
    SECRET,
    Behaviour,
    LauncherContract,
    RunFolder,
    play_script,
    write_script,
)

from shadowclone_docker_launch.launcher import (
    CAPABILITIES,
    LABEL_SCOPE,
    LABEL_SPARE,
    VERSION_LABEL,
    DockerLauncher,
    container_name,
    proxy_name,
    volume_name,
)


class TestDockerLauncher(LauncherContract):
    image = IMAGE

    def make_launcher(self, root: Path) -> Launcher:
        client = docker_client()
        clone_image(client)
        return DockerLauncher(root / "clones", IMAGE, client=client, command_for=play_script)

    def arrange(self, root: Path, folder: RunFolder, behaviour: Behaviour) -> None:
        write_script(folder, behaviour)

    def traces(self, launcher: Launcher, clone_id: str) -> list[str]:
        assert isinstance(launcher, DockerLauncher)
        return launcher.traces(clone_id)


class SparesFirst(DockerLauncher):
    """The Docker launcher, each clone's container started ahead as a spare: its run folder
    (what `start` wrote in it) becomes a spare folder, a spare is kept there, the folder goes
    back to its name as a start takes a spare, and the launch must take the spare up."""

    def launch(self, spec: LaunchSpec) -> None:
        if self.status(spec.clone_id).state is not LaunchState.MISSING:
            super().launch(spec)  # refused: it has a container
            return
        spare = spec.run_folder.with_name(f".spare-{spec.clone_id}")
        spare.mkdir()
        for entry in spec.run_folder.iterdir():
            entry.rename(spare / entry.name)
        self.keep_spare(attrs.evolve(spec, clone_id=spare.name, run_folder=spare, labels={}))
        spec.run_folder.rmdir()
        spare.rename(spec.run_folder)
        super().launch(spec)
        container = self.client.containers.get(container_name(spec.clone_id))
        assert LABEL_SPARE in container.labels, "the launch took the spare up"


class TestDockerLauncherThroughSpares(TestDockerLauncher):
    """The whole contract again, every clone in a container started ahead of it."""

    def make_launcher(self, root: Path) -> Launcher:
        client = docker_client()
        clone_image(client)
        return SparesFirst(root / "clones", IMAGE, client=client, command_for=play_script)


# --------------------------------------------------------------------------- beyond the contract

INSIDE = r"""
import json, os
def attempt(action):
    try:
        return action()
    except OSError as error:
        return f"error: {error.strerror}"
def status(key):
    with open("/proc/self/status") as f:
        return next(line.split()[1] for line in f if line.startswith(key + ":"))
secrets = os.environ["SHADOWCLONE_SECRETS_FILE"]
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
    "caps": status("CapEff"), "ambient": status("CapAmb"),
    "no_new_privs": status("NoNewPrivs"),
    "secrets_path": secrets,
    "secrets": attempt(lambda: open(secrets).read()),
    "write_mount": attempt(lambda: open("/clone/secrets.toml", "a").write("x")),
    "write_copy": attempt(lambda: open(secrets, "a").write("x")),
    "docker_socket": os.path.exists("/var/run/docker.sock") or os.path.exists("/run/docker.sock"),
    "home_writable": attempt(lambda: open(os.path.expanduser("~/probe"), "w").write("x")),
    "wrote": attempt(lambda: open("/clone/run/written-by-clone", "w").write("x")),
    "run_folder_files": sorted(os.listdir("/clone/run")),
}))
"""


def spec_for(root: Path, number: int, **changes: Any) -> LaunchSpec:
    spec = TestDockerLauncher().spec(root, Behaviour.FINISH, number)
    (spec.run_folder / SCRIPT_FILE).unlink()  # it runs INSIDE instead
    return attrs.evolve(spec, **changes)


def run_inside(launcher: DockerLauncher, spec: LaunchSpec) -> tuple[CloneStatus, dict[str, Any]]:
    launcher.command_for = lambda _spec: ["python3", "-c", INSIDE]
    launcher.launch(spec)
    status = TestDockerLauncher().exited(launcher, spec.clone_id)
    assert status.exit_code == 0, status.output_tail
    found: dict[str, Any] = json.loads(status.output_tail.splitlines()[-1])
    return status, found


@pytest.fixture
def docker_launcher(
    client: docker.DockerClient, image: str, tmp_path: Path
) -> Iterator[DockerLauncher]:
    launcher = DockerLauncher(tmp_path / "clones", image, client=client)
    yield launcher
    for status in launcher.running():
        launcher.remove(status.clone_id)


def test_the_secrets_never_reach_the_containers_configuration(
    docker_launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path
) -> None:
    spec = spec_for(tmp_path, 1, cpus=1.5, memory="512m", env={"SOME_SETTING": "on"})
    _, seen = run_inside(docker_launcher, spec)
    assert SECRET in seen["secrets"], "the clone can read the secrets"

    inspected = client.api.inspect_container(container_name(spec.clone_id))
    assert not [item for item in inspected["Config"]["Env"] if SECRET in item]
    assert SECRET not in json.dumps(inspected), "the secret is nowhere in the configuration"
    assert "SOME_SETTING=on" in inspected["Config"]["Env"]
    mounts = {m["Destination"]: m for m in inspected["Mounts"]}
    assert mounts["/clone/secrets.toml"]["Source"] == str(spec.secrets_file)
    assert mounts["/clone/secrets.toml"]["RW"] is False
    assert mounts["/clone/run"]["RW"] is True
    assert not any("docker.sock" in m["Source"] for m in inspected["Mounts"])
    host = inspected["HostConfig"]
    assert host["Init"] is True
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == sorted(CAPABILITIES)
    assert inspected["Config"]["User"] == "0:0", "its entry point drops to the run program's user"
    assert host["NanoCpus"] == 1_500_000_000
    assert host["Memory"] == 512 * 2**20
    assert any(opt.startswith("no-new-privileges") for opt in host["SecurityOpt"])
    assert inspected["Config"]["Labels"]["shadowclone.clone"] == spec.clone_id


RUN_PROGRAM_CAPS = (1 << 0) | (1 << 5) | (1 << 6) | (1 << 7)
"""CHOWN, KILL, SETGID, SETUID: the run program's, to start and stop the engine as its user."""
SHARED_GID = 1002
"""image/Dockerfile's group of the run program and the engine."""


def test_with_a_root_owner_the_run_program_is_the_clone_user_with_four_capabilities(
    docker_launcher: DockerLauncher, tmp_path: Path
) -> None:
    docker_launcher.owner = (0, 0)
    spec = spec_for(tmp_path, 1)
    _, seen = run_inside(docker_launcher, spec)
    assert (seen["uid"], seen["gid"]) == (1000, 1000)
    assert seen["groups"] == [1000, SHARED_GID]
    assert int(seen["caps"], 16) == int(seen["ambient"], 16) == RUN_PROGRAM_CAPS
    assert seen["no_new_privs"] == "1"
    assert seen["secrets_path"] == "/run/clone/secrets.toml", "its private in-memory copy"
    assert SECRET in seen["secrets"]
    assert seen["write_mount"].startswith("error: "), "root's file, and mounted read-only"
    assert seen["write_copy"] == "error: Permission denied"
    assert seen["docker_socket"] is False
    assert seen["home_writable"] == 1 and seen["wrote"] == 1
    assert "request.json" in seen["run_folder_files"]
    written = spec.run_folder / "written-by-clone"
    assert written.read_text() == "x"
    assert spec.secrets_file.read_text() == f'anthropic_api_key = "{SECRET}"\n'


def test_with_an_ordinary_owner_the_run_program_runs_as_the_owner_and_copies_nothing(
    docker_launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path
) -> None:
    uid = gid = 4321
    docker_launcher.owner = (uid, gid)
    spec = spec_for(tmp_path, 1)
    for path in (spec.run_folder, *spec.run_folder.iterdir(), spec.secrets_file):
        os.chown(path, uid, gid)  # the owner's files, as `start` and `config init` make them
    _, seen = run_inside(docker_launcher, spec)
    assert (seen["uid"], seen["gid"]) == (uid, gid)
    assert seen["groups"] == [SHARED_GID, uid]
    assert int(seen["caps"], 16) == RUN_PROGRAM_CAPS
    assert seen["secrets_path"] == "/clone/secrets.toml", "read where it is mounted"
    assert SECRET in seen["secrets"]
    assert seen["write_mount"] == "error: Read-only file system"
    assert seen["home_writable"] == 1
    written = spec.run_folder / "written-by-clone"
    assert (written.stat().st_uid, written.stat().st_gid) == (uid, gid), "the owner's file"
    inspected = client.api.inspect_container(container_name(spec.clone_id))
    assert inspected["Config"]["User"] == "0:0"
    assert f"SHADOWCLONE_OWNER={uid}:{gid}" in inspected["Config"]["Env"]
    assert "/run/clone" not in inspected["HostConfig"]["Tmpfs"]


def test_a_clone_killed_from_outside_has_exited_with_its_signal(
    docker_launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path
) -> None:
    contract = TestDockerLauncher()
    docker_launcher.command_for = play_script
    clone_id = contract.launched(docker_launcher, tmp_path, Behaviour.HANG, 1)
    client.containers.get(container_name(clone_id)).kill()
    status = contract.exited(docker_launcher, clone_id)
    assert status.exit_code == 137
    assert contract.final(tmp_path / "clones" / clone_id) is None


def test_the_reaper_removes_only_what_crashes_left(
    docker_launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path, image: str
) -> None:
    contract = TestDockerLauncher()
    docker_launcher.command_for = play_script
    kept = contract.launched(docker_launcher, tmp_path, Behaviour.HANG, 1)
    orphan = contract.launched(docker_launcher, tmp_path, Behaviour.HANG, 2)
    shutil.rmtree(tmp_path / "clones" / orphan)  # the owner deleted its run folder
    never = spec_for(tmp_path, 3)
    client.containers.create(  # what a launch killed between create and start leaves
        image,
        name=container_name(never.clone_id),
        labels={"shadowclone.clone": never.clone_id, LABEL_SCOPE: docker_launcher.scope},
    )
    headless = spec_for(
        tmp_path, 4, network=NetworkMode.MODEL_ONLY, model_host="host.docker.internal:9"
    )
    docker_launcher.launch(headless)
    client.containers.get(container_name(headless.clone_id)).remove(force=True)
    other = DockerLauncher(tmp_path / "elsewhere", image, client=client)
    foreign = other.traces(kept)

    removed = docker_launcher.reap_strays()

    assert sorted(removed) == sorted(
        [
            f"container {container_name(orphan)} (its run folder is gone)",
            f"container {container_name(never.clone_id)} (it was never started)",
            f"container {proxy_name(headless.clone_id)} (its clone is gone)",
            f"volume {volume_name(headless.clone_id)} (its clone is gone)",
        ]
    )
    for clone_id in (orphan, never.clone_id, headless.clone_id):
        assert docker_launcher.traces(clone_id) == []
    assert docker_launcher.status(kept).state is LaunchState.RUNNING
    assert foreign == [], "another clones folder sees none of these"
    assert docker_launcher.reap_strays() == []


def test_check_says_what_to_do(
    client: docker.DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = DockerLauncher(tmp_path / "clones", "shadowclone-no-such:image", client=client)
    with pytest.raises(PluginUnavailable, match="shadowclone image build"):
        missing.check()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(PluginUnavailable, match="start Docker"):
        DockerLauncher(tmp_path / "clones").check()


def test_check_refuses_an_image_of_another_shadowclone(
    client: docker.DockerClient, image: str, production_image: str, tmp_path: Path
) -> None:
    """The image carries the version of the shadowclone it holds; the launcher (and so
    `shadowclone status`, start's admission and serve) refuses one that is not this machine's,
    saying how to build it again."""
    for built in (image, production_image):
        labels = client.images.get(built).labels
        assert labels.get(VERSION_LABEL) == shadowclone_version, built
    DockerLauncher(tmp_path / "clones", production_image, client=client).check()

    (tmp_path / "context").mkdir()
    (tmp_path / "context" / "Dockerfile").write_text(
        f'FROM {production_image}\nLABEL {VERSION_LABEL}="0.0.1"\n'
    )
    older = f"shadowclone-test-older:0.0.1-{uuid.uuid4().hex[:8]}"  # this run's own
    client.images.build(path=str(tmp_path / "context"), tag=older, rm=True)
    try:
        launcher = DockerLauncher(tmp_path / "clones", older, client=client)
        with pytest.raises(PluginUnavailable) as refused:
            launcher.check()
        assert str(refused.value) == (
            f"the clone image {older} holds shadowclone 0.0.1, and this machine runs "
            f"{shadowclone_version}: build it again with `shadowclone image build`"
        )
    finally:
        client.images.remove(older, force=True)
