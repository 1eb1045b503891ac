"""Network-off clones: from inside, the fake GitHub cannot be reached, directly or through the
egress proxy, while the fake model API answers through the proxy, for the holder of the
clone's egress token only (the run program; the engine, without it, gets 407); an open clone,
run the same way, reaches both (so the refusals come from the network, not from the test)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from shadowclone.plugin import LaunchSpec, LaunchState, NetworkMode
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FakeModelServer
from shadowclone_testing.network_probe import PING, PROBE

from shadowclone_docker_launch.launcher import DockerLauncher

WAIT_S = 60.0
HOST = "host.docker.internal"


@pytest.fixture
def servers(host_address: str, tmp_path: Path) -> Iterator[tuple[FakeGitHub, FakeModelServer]]:
    with (
        FakeGitHub(tmp_path / "github", host=host_address) as github,
        FakeModelServer([], final_text="pong", host=host_address) as model,
    ):
        yield github, model


def probe(
    launcher: DockerLauncher,
    root: Path,
    network: NetworkMode,
    github: FakeGitHub,
    model: FakeModelServer,
    image: str,
    host_ip: str,
) -> dict[str, Any]:
    clone_id = f"261202-000000-{network.value[:4]}"
    folder = root / "clones" / clone_id
    folder.mkdir(parents=True)
    spec = LaunchSpec(
        clone_id=clone_id,
        run_folder=folder,
        secrets_file=root / "secrets.toml",
        image=image,
        network=network,
        model_host=f"{HOST}:{model.port}",
    )
    launcher.command_for = lambda _spec: [
        "python3",
        "-c",
        PROBE,
        HOST,
        str(github.port),
        str(model.port),
        f"{PING} ({network})",
        host_ip,
    ]
    launcher.launch(spec)
    try:
        deadline = time.monotonic() + WAIT_S
        while (status := launcher.status(clone_id)).state is LaunchState.RUNNING:
            assert time.monotonic() < deadline, "the probe did not finish"
            time.sleep(0.1)
        assert status.exit_code == 0, status.output_tail
        found: dict[str, Any] = json.loads(status.output_tail.splitlines()[-1])
        return found
    finally:
        launcher.remove(clone_id)
        assert launcher.traces(clone_id) == []


def test_a_network_off_clone_reaches_the_model_and_nothing_else(
    client: docker.DockerClient,
    image: str,
    host_address: str,
    tmp_path: Path,
    servers: tuple[FakeGitHub, FakeModelServer],
) -> None:
    github, model = servers
    launcher = DockerLauncher(tmp_path / "clones", image, client=client)
    seen = probe(launcher, tmp_path, NetworkMode.MODEL_ONLY, github, model, image, host_address)

    assert seen["proxy"], "the clone is told where its proxy is"
    assert seen["proxy_variables"] == ["NO_PROXY", "SHADOWCLONE_EGRESS_PROXY", "no_proxy"]
    assert seen["direct_github"].startswith("failed"), seen
    assert seen["direct_model"].startswith("failed"), "no way out but the proxy"
    assert seen["direct_github_ip"].startswith("failed"), "not even by address"
    assert seen["github"]["status"] == 403 and "egress proxy" in seen["github"]["body"], seen
    assert "403" in seen["github_tls"]["error"], seen
    assert "403" in seen["github_tunnel"]["connect"], seen
    assert github.requests() == [], "nothing reached the fake GitHub"

    assert seen["model"]["status"] == 200 and "pong" in seen["model"]["body"], seen
    assert " 200 " in seen["model_tunnel"]["reply"], seen
    assert model.saw_text(f"{PING} ({NetworkMode.MODEL_ONLY})")

    # Without the egress token (the engine's case), the relay lets nothing through.
    assert seen["model_no_token"]["status"] == 407, seen
    assert seen["model_wrong_token"]["status"] == 407, seen
    assert "407" in seen["tunnel_no_token"]["connect"], seen
    assert "407" in seen["tunnel_wrong_token"]["connect"], seen
    assert len(model.model_requests()) == 2, "only the two requests with the token arrived"


def test_an_open_clone_reaches_both_directly(
    client: docker.DockerClient,
    image: str,
    host_address: str,
    tmp_path: Path,
    servers: tuple[FakeGitHub, FakeModelServer],
) -> None:
    github, model = servers
    launcher = DockerLauncher(tmp_path / "clones", image, client=client)
    seen = probe(launcher, tmp_path, NetworkMode.OPEN, github, model, image, host_address)

    assert seen["proxy"] is None
    assert seen["direct_github"] == "connected" and seen["direct_model"] == "connected"
    assert seen["direct_github_ip"] == "connected"
    assert "status" in seen["github"] and seen["github"]["status"] != 403, seen
    assert github.requests(), "the open clone's request reached the fake GitHub"
    assert seen["model"]["status"] == 200 and "pong" in seen["model"]["body"], seen
    assert model.saw_text(f"{PING} ({NetworkMode.OPEN})")


def test_a_network_off_clone_needs_a_model_host(
    client: docker.DockerClient, image: str, tmp_path: Path
) -> None:
    from shadowclone.plugin import Refused

    launcher = DockerLauncher(tmp_path / "clones", image, client=client)
    folder = tmp_path / "clones" / "261202-000000-none"
    folder.mkdir(parents=True)
    spec = LaunchSpec(
        "261202-000000-none", folder, tmp_path / "secrets.toml", image, NetworkMode.MODEL_ONLY
    )
    with pytest.raises(Refused, match="no model host"):
        launcher.launch(spec)
    assert launcher.traces(spec.clone_id) == []
