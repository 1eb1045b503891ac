"""The swarm launcher passes the launcher contract on a real swarm of three docker-in-docker
nodes: each clone a one-replica service of the clone image, pulled by digest from the registry
on whichever node the swarm chose, its run folder at the same path on every node, its secrets
file a swarm secret that never shows in the service's definition."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest
from shadowclone.plugin import Launcher, LaunchSpec, LaunchState, NetworkMode
from shadowclone.relay.server import RelayThread
from shadowclone_testing.containers import IMAGE
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FakeModelServer
from shadowclone_testing.network_probe import PING, PROBE
from shadowclone_testing.suites.launcher import (
    HANG_NOTE,
    SECRET,
    Behaviour,
    LauncherContract,
    RunFolder,
    play_script,
    write_script,
)
from shadowclone_testing.swarm import DAEMON_PORT, SWARM_PORT, Swarm, wait_until
from shadowclone_testing.web import free_port

from shadowclone_swarm_launch.launcher import SwarmLauncher
from shadowclone_swarm_launch.settings import SwarmSettings

GOSSIP = 7946
"""Every node's TCP port for the swarm's membership gossip."""


def swarm_launcher(swarm: Swarm, root: Path, node_lost_s: float = 60.0) -> SwarmLauncher:
    settings = SwarmSettings(
        manager=swarm.manager_url,
        registry=swarm.registry,
        run_folders="shared",
        node_lost_s=node_lost_s,
    )
    return SwarmLauncher(root / "clones", IMAGE, settings=settings, command_for=play_script)


class TestSwarmLauncher(LauncherContract):
    image = IMAGE

    @pytest.fixture(autouse=True)
    def _on(self, sc_swarm: Swarm, sc_swarm_image: str) -> None:
        self.swarm = sc_swarm

    def make_launcher(self, root: Path) -> Launcher:
        return swarm_launcher(self.swarm, root)

    def arrange(self, root: Path, folder: RunFolder, behaviour: Behaviour) -> None:
        write_script(folder, behaviour)

    def traces(self, launcher: Launcher, clone_id: str) -> list[str]:
        assert isinstance(launcher, SwarmLauncher)
        return launcher.traces(clone_id)


def test_the_secrets_never_show_in_the_services_definition(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path
) -> None:
    contract = TestSwarmLauncher()
    contract.swarm = sc_swarm
    launcher = swarm_launcher(sc_swarm, tmp_path)
    spec = contract.spec(tmp_path, Behaviour.FINISH, 1)
    launcher.launch(spec)
    try:
        [service] = sc_swarm.manager.services.list(filters={"name": f"shadowclone-{spec.clone_id}"})
        assert SECRET not in json.dumps(service.attrs)
        assert contract.exited(launcher, spec.clone_id).exit_code == 0
        assert SECRET not in launcher.status(spec.clone_id).output_tail
        written = [p for p in spec.run_folder.rglob("*") if p.is_file()]
        assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]
    finally:
        launcher.remove(spec.clone_id)
    assert launcher.traces(spec.clone_id) == []


def test_a_clone_whose_node_dies_fails_once_and_never_runs_again(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path
) -> None:
    contract = TestSwarmLauncher()
    contract.swarm = sc_swarm
    launcher = swarm_launcher(sc_swarm, tmp_path, node_lost_s=5)
    clone_id = contract.launched(launcher, tmp_path, Behaviour.HANG, 1)
    [service] = sc_swarm.manager.services.list(filters={"name": f"shadowclone-{clone_id}"})
    [task] = cast(Any, service).tasks()
    node = sc_swarm.node(task["NodeID"])
    assert node.role == "worker"
    killed = time.monotonic()
    sc_swarm.kill_node(node.hostname)
    try:
        wait_until(lambda: sc_swarm.state(node.hostname) == "down", "the manager sees it down")
        down_s = time.monotonic() - killed
        time.sleep(6)  # past node_lost_s by the manager's clock
        # a serve started after the node went down need not wait node_lost_s again: the
        # manager's record of the node says how long it has been down
        fresh = swarm_launcher(sc_swarm, tmp_path, node_lost_s=5)
        status = fresh.status(clone_id)
        assert status.state is LaunchState.EXITED and status.exit_code is None
        assert f"its node {node.hostname} has been down for " in status.output_tail
        print(
            f"node killed -> down {down_s:.1f} s -> reported lost {time.monotonic() - killed:.1f} s"
        )
        described = dict((name, fine) for name, fine, _ in launcher.describe())
        assert described[f"node {node.hostname}"] is False
        # and the first launcher reads the same: the reason is on the service
        assert launcher.status(clone_id).output_tail == status.output_tail
    finally:
        sc_swarm.restore_node(node.hostname)
    time.sleep(5)  # the node back: its agent hears the service has no replica
    running = sc_swarm.client(node.hostname).containers.list(
        filters={"label": f"shadowclone.clone={clone_id}"}
    )
    assert running == []
    folder = contract.folder_of(tmp_path, clone_id)
    assert contract.notes(folder).count(HANG_NOTE) == 1, "the clone ran once"
    assert launcher.status(clone_id).state is LaunchState.EXITED
    launcher.remove(clone_id)
    assert launcher.traces(clone_id) == []


def test_status_shows_each_node_with_its_clones(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path
) -> None:
    contract = TestSwarmLauncher()
    contract.swarm = sc_swarm
    launcher = swarm_launcher(sc_swarm, tmp_path)
    clone_id = contract.launched(launcher, tmp_path, Behaviour.HANG, 1)
    try:
        lines = launcher.describe()
        names = [name for name, _, _ in lines]
        assert names == [f"node {n.hostname}" for n in sc_swarm.nodes] + ["registry"]
        assert all(
            fine for name, fine, _ in lines if name != f"node {sc_swarm.manager_node.hostname}"
        )
        assert sum(" 1 clone(s) running" in detail for _, _, detail in lines) == 1
    finally:
        launcher.stop(clone_id, grace_s=5)
        launcher.remove(clone_id)


def test_swarm_check_says_what_the_swarm_offers(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner
    from shadowclone.config import HOME_VARIABLE, default_paths, init_config, set_value

    from shadowclone_swarm_launch.commands import swarm

    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "home"))
    paths = default_paths()
    init_config(paths)
    set_value(paths, "launchers.swarm.manager", sc_swarm.manager_url)
    set_value(paths, "launchers.swarm.registry", sc_swarm.registry)
    done = CliRunner().invoke(swarm, ["check"])
    lines = done.output.splitlines()
    assert done.exit_code == 1, done.output  # no run_folders said yet, the manager drained
    assert lines[0].startswith("NO   manager") and 'run_folders = "sent"' in lines[0]
    set_value(paths, "launchers.swarm.run_folders", "shared")
    done = CliRunner().invoke(swarm, ["check"])
    lines = done.output.splitlines()
    assert [line[:4].strip() for line in lines] == ["ok", "NO", "ok", "ok", "ok", "ok"], lines
    assert f"node {sc_swarm.manager_node.hostname}" in lines[1] and "drain" in lines[1]


def test_a_network_off_clone_reaches_its_model_through_its_proxy_and_nothing_else(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path
) -> None:
    """A stranger's clone on a worker: on its own internal overlay, whose one other service is
    its egress proxy; the model through the proxy with the token, nothing else at all: not
    this machine, nor any node's Docker API or gossip port (its own node's included), nor the
    manager's swarm port, nor the registry."""
    here = SwarmSettings(manager=sc_swarm.manager_url).host()
    with (
        FakeGitHub(tmp_path / "github", host=here) as github,
        FakeModelServer([], final_text="pong", host=here) as model,
    ):
        launcher = swarm_launcher(sc_swarm, tmp_path)
        clone_id = "261206-000000-off1"
        folder = tmp_path / "clones" / clone_id
        folder.mkdir(parents=True)
        spec = LaunchSpec(
            clone_id=clone_id,
            run_folder=folder,
            secrets_file=tmp_path / "none.toml",
            image=IMAGE,
            network=NetworkMode.MODEL_ONLY,
            model_host=f"{here}:{model.port}",
        )
        ping = f"{PING} (swarm)"
        registry = f"{here}:{sc_swarm.registry.rsplit(':', 1)[1]}"  # the nodes' way to it
        others = [
            registry,
            *(f"{n.address}:{port}" for n in sc_swarm.nodes for port in (DAEMON_PORT, GOSSIP)),
            f"{sc_swarm.manager_node.address}:{SWARM_PORT}",
        ]
        for address, port in (target.rsplit(":", 1) for target in others):
            # each listens, as this machine sees: failing to reach it is the network's doing
            socket.create_connection((address, int(port)), timeout=5).close()
        argv = [here, str(github.port), str(model.port), ping, here, *others]
        launcher.command_for = lambda _spec: ["python3", "-c", PROBE, *argv]
        launcher.launch(spec)
        try:
            status = TestSwarmLauncher().exited(launcher, clone_id)
            assert status.exit_code == 0, status.output_tail
            seen = json.loads(status.output_tail.splitlines()[-1])
        finally:
            launcher.remove(clone_id)
        assert launcher.traces(clone_id) == []
    assert seen["direct_github"].startswith("failed"), seen
    assert seen["direct_model"].startswith("failed"), "no way out but the proxy"
    assert seen["github"]["status"] == 403 and "egress proxy" in seen["github"]["body"], seen
    assert "403" in seen["github_tunnel"]["connect"], seen
    assert github.requests() == [], "nothing reached the fake GitHub"
    assert seen["model"]["status"] == 200 and "pong" in seen["model"]["body"], seen
    assert " 200 " in seen["model_tunnel"]["reply"], seen
    assert model.saw_text(ping)
    assert seen["model_no_token"]["status"] == 407, seen
    assert "407" in seen["tunnel_no_token"]["connect"], seen
    assert len(model.model_requests()) == 2, "only the two requests with the token arrived"
    reached = {to: how for to, how in seen["direct_others"].items() if not how.startswith("failed")}
    assert len(seen["direct_others"]) == len(others) and reached == {}, seen["direct_others"]


RELAY_PROBE = r"""
import json, os, urllib.error, urllib.request
url = os.environ["SHADOWCLONE_RELAY"] + "/v1/clones/" + os.environ["SHADOWCLONE_CLONE_ID"]
seen = {}
for way, proxy in (("proxy", os.environ.get("SHADOWCLONE_EGRESS_PROXY")), ("direct", None)):
    request = urllib.request.Request(url + "/request.json", headers={  # a proxy changes it
        "authorization": "Bearer " + os.environ["SHADOWCLONE_RELAY_CREDENTIAL"]})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(
        {"http": proxy} if proxy else {}))
    try:
        with opener.open(request, timeout=10) as answer:
            seen[way] = [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as error:
        seen[way] = [error.code, ""]
    except OSError as error:
        seen[way] = [None, str(error)]
print(json.dumps(seen))
"""


def test_a_network_off_clone_with_a_sent_run_folder_reaches_serves_relay_by_its_proxy(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path
) -> None:
    """Its run folder on its node, its way to serve's relay the egress proxy's (which lets the
    relay's address through with the clone's token), never direct."""
    here = SwarmSettings(manager=sc_swarm.manager_url).host()
    clones = tmp_path / "clones"
    clone_id = "261206-000000-sent"
    (clones / clone_id).mkdir(parents=True)
    (clones / clone_id / "request.json").write_text('{"sent": true}\n')
    relay = RelayThread(clones, here, free_port())
    relay.start()
    settings = SwarmSettings(
        manager=sc_swarm.manager_url,
        registry=sc_swarm.registry,
        run_folders="sent",
        relay_port=relay.port,
    )
    launcher = SwarmLauncher(clones, IMAGE, settings=settings)
    launcher.command_for = lambda _spec: ["python3", "-c", RELAY_PROBE]
    spec = LaunchSpec(
        clone_id=clone_id,
        run_folder=clones / clone_id,
        secrets_file=tmp_path / "none.toml",
        image=IMAGE,
        network=NetworkMode.MODEL_ONLY,
        model_host=f"{here}:9",
        relay=relay.access(clone_id),
    )
    try:
        launcher.launch(spec)
        try:
            status = TestSwarmLauncher().exited(launcher, clone_id)
            assert status.exit_code == 0, status.output_tail
            seen = json.loads(status.output_tail.splitlines()[-1])
        finally:
            launcher.remove(clone_id)
    finally:
        relay.stop()
    assert seen["proxy"] == [200, '{"sent": true}\n'], seen
    assert seen["direct"][0] is None, "no way to serve but the proxy"
    assert (clones / clone_id / ".swarm-node").read_text().strip() in {
        node.node_id for node in sc_swarm.workers
    }, "its later phases go to its node"
