"""A clone's Compose services, as the Docker launcher starts them from its image's label: beside
an open clone on its own network, healthy first when asked; kept, with their data, for the
clone's next phase; never beside a network-off clone; removed with the clone, or by the reaper
once the clone is gone; a service that never gets healthy fails the launch in one line and
leaves nothing."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import docker
import pytest
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin import (
    Compose,
    Launcher,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    PluginUnavailable,
)
from shadowclone_testing.containers import IMAGE
from shadowclone_testing.suites.launcher import Behaviour, LauncherContract

from shadowclone_docker_launch.launcher import DockerLauncher
from shadowclone_docker_launch.names import container_name
from shadowclone_docker_launch.services import (
    LABEL_SERVICE_OF,
    LABEL_SERVICES,
    label_value,
    network_name,
    service_name,
)


class Specs(LauncherContract):
    """Only the contract's clone specs and waits: its tests are test_launcher.py's."""

    __test__ = False
    image = IMAGE

    def make_launcher(self, root: Path) -> Launcher:
        return DockerLauncher(root / "clones", IMAGE)

    def arrange(self, root: Path, folder: RunFolder, behaviour: Behaviour) -> None:
        """The launches here name their own command."""

    def traces(self, launcher: Launcher, clone_id: str) -> list[str]:
        return launcher.traces(clone_id)  # type: ignore[attr-defined, no-any-return]


def spec_for(root: Path, number: int, **changes: Any) -> LaunchSpec:
    return attrs.evolve(Specs().spec(root, Behaviour.FINISH, number), **changes)


SERVE = (
    "mkdir -p /data && echo ok-from-store > /data/index.html && "
    "exec python3 -m http.server 8080 --directory /data"
)
PROBE = (
    "import urllib.request; "
    "print(urllib.request.urlopen('http://store:8080/', timeout=10).read().decode().strip())"
)


def composed(image: str, healthy: str = "/data/index.html") -> Compose:
    """The reading `ensure_image` puts in an environment image's label."""
    store = {
        "name": "store",
        "image": image,
        "entrypoint": ["sh", "-c", SERVE],
        "user": "root",
        "volumes": [{"name": "data", "target": "/data"}],
        "healthcheck": {"test": ["CMD", "test", "-s", healthy], "interval_s": 0.5, "retries": 20},
    }
    app = {"name": "app", "image": "unused", "depends_on": {"store": "service_healthy"}}
    return Compose.from_json({"files": ["compose.yaml"], "service": app, "others": [store]})


@pytest.fixture
def labelled(client: docker.DockerClient, image: str) -> Iterator[tuple[str, str]]:
    """Two images of the clone image: one whose clones start the store, healthy once it
    serves; one whose store never gets healthy."""
    tags = []
    for healthy in ("/data/index.html", "/never"):
        tag = f"shadowclone-test-compose:{uuid.uuid4().hex[:12]}"
        client.images.build(
            fileobj=io.BytesIO(f"FROM {image}\n".encode()),
            tag=tag,
            labels={LABEL_SERVICES: label_value(composed(image, healthy))},
            rm=True,
        )
        tags.append(tag)
    yield tags[0], tags[1]
    for tag in tags:
        client.images.remove(tag, force=True)


@pytest.fixture
def launcher(client: docker.DockerClient, image: str, tmp_path: Path) -> Iterator[DockerLauncher]:
    found = DockerLauncher(tmp_path / "clones", image, client=client)
    yield found
    for status in found.running():
        found.remove(status.clone_id)


def services(client: docker.DockerClient, clone_id: str) -> list[str]:
    found = client.containers.list(all=True, filters={"label": f"{LABEL_SERVICE_OF}={clone_id}"})
    return sorted(str(container.name) for container in found)


def test_an_open_clone_reaches_its_services_by_name_and_they_end_with_it(
    launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path, labelled: tuple[str, str]
) -> None:
    spec = spec_for(tmp_path, 1, image=labelled[0])
    launcher.command_for = lambda _spec: ["python3", "-c", PROBE]
    launcher.launch(spec)
    assert services(client, spec.clone_id) == [service_name(spec.clone_id, "store")]
    status = Specs().exited(launcher, spec.clone_id)
    assert (status.exit_code, status.output_tail.splitlines()[-1]) == (0, "ok-from-store")
    traces = launcher.traces(spec.clone_id)
    assert f"network {network_name(spec.clone_id)}" in traces
    assert f"volume shadowclone-{spec.clone_id}-volume-data" in traces
    launcher.remove(spec.clone_id)
    assert launcher.traces(spec.clone_id) == []


def test_a_later_phase_takes_up_the_services_and_their_data(
    launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path, labelled: tuple[str, str]
) -> None:
    spec = spec_for(tmp_path, 5, image=labelled[0])
    launcher.command_for = lambda _spec: ["python3", "-c", PROBE]
    launcher.launch(spec)
    assert Specs().exited(launcher, spec.clone_id).output_tail.splitlines()[-1] == "ok-from-store"
    store = client.containers.get(service_name(spec.clone_id, "store"))
    store.exec_run(["sh", "-c", "echo written-in-phase-one > /data/index.html"])
    launcher.end_phase(spec.clone_id)
    assert launcher.status(spec.clone_id).state is LaunchState.MISSING
    launcher.launch(spec)  # the next phase: the same store, its data kept
    status = Specs().exited(launcher, spec.clone_id)
    assert status.output_tail.splitlines()[-1] == "written-in-phase-one"
    assert client.containers.get(service_name(spec.clone_id, "store")).id == store.id
    # A service that stopped meanwhile is not taken up: the next phase starts them anew.
    launcher.end_phase(spec.clone_id)
    store.stop(timeout=0)
    launcher.launch(spec)
    assert Specs().exited(launcher, spec.clone_id).output_tail.splitlines()[-1] == "ok-from-store"
    assert client.containers.get(service_name(spec.clone_id, "store")).id != store.id
    launcher.remove(spec.clone_id)
    assert launcher.traces(spec.clone_id) == []


def test_a_network_off_clone_runs_without_its_services(
    launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path, labelled: tuple[str, str]
) -> None:
    spec = spec_for(
        tmp_path,
        2,
        image=labelled[0],
        network=NetworkMode.MODEL_ONLY,
        model_host="host.docker.internal:9",
    )
    launcher.command_for = lambda _spec: ["python3", "-c", PROBE]
    launcher.launch(spec)
    status = Specs().exited(launcher, spec.clone_id)
    assert status.exit_code != 0  # no store to reach: not even its name
    assert services(client, spec.clone_id) == []
    launcher.remove(spec.clone_id)


def test_the_reaper_removes_the_services_of_a_clone_that_is_gone(
    launcher: DockerLauncher, client: docker.DockerClient, tmp_path: Path, labelled: tuple[str, str]
) -> None:
    spec = spec_for(tmp_path, 3, image=labelled[0])
    launcher.command_for = lambda _spec: ["sleep", "300"]
    launcher.launch(spec)
    assert launcher.status(spec.clone_id).state is LaunchState.RUNNING
    client.containers.get(container_name(spec.clone_id)).remove(force=True)
    removed = launcher.reap_strays()
    clone_id = spec.clone_id
    assert sorted(removed) == sorted(
        [
            f"container {service_name(clone_id, 'store')} (its clone is gone)",
            f"network {network_name(clone_id)} (its clone is gone)",
            f"volume shadowclone-{clone_id}-volume-data (its clone is gone)",
        ]
    )
    assert launcher.traces(clone_id) == []


def test_a_service_that_never_gets_healthy_fails_the_launch_in_one_line(
    launcher: DockerLauncher,
    client: docker.DockerClient,
    tmp_path: Path,
    labelled: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shadowclone_docker_launch import services as module

    monkeypatch.setattr(module, "READY_TIMEOUT_S", 8.0)
    spec = spec_for(tmp_path, 4, image=labelled[1])
    with pytest.raises(PluginUnavailable) as raised:
        launcher.launch(spec)
    assert str(raised.value).startswith("the Compose service store was not healthy")
    assert "\n" not in str(raised.value)
    assert launcher.traces(spec.clone_id) == []
