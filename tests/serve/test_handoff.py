"""Phases through serve: a clone that hands its work on to a next phase is launched again on the
network that phase asks for, also when serve was down at the moment the phase ended."""

from __future__ import annotations

import time

from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, Record, State
from shadowclone.plugin import LaunchSpec, LaunchState, NetworkMode, PhasedLauncher
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.serving import Scripts, serving, wait_state, wait_until

PHASES = Script(play=Play.PHASES)


class NetworkLog(FakeLauncher):
    """The fake launcher, remembering the network each launch was given."""

    def __init__(self) -> None:
        super().__init__(default_state_dir())
        self.networks: list[NetworkMode] = []

    def launch(self, spec: LaunchSpec) -> None:
        self.networks.append(spec.network)
        super().launch(spec)


class Phased(FakeLauncher):
    """The fake launcher as a `PhasedLauncher`, remembering each phase's end and removal."""

    def __init__(self) -> None:
        super().__init__(default_state_dir())
        self.calls: list[str] = []

    def end_phase(self, clone_id: str) -> None:
        self.calls.append("end_phase")
        super().remove(clone_id)

    def remove(self, clone_id: str) -> None:
        self.calls.append("remove")
        super().remove(clone_id)

    def launch(self, spec: LaunchSpec) -> None:
        self.calls.append("launch")
        super().launch(spec)


def notes(paths: Paths, clone_id: str) -> list[str]:
    lines, _, _ = RunFolder(paths.clones_dir / clone_id).progress()
    return [line.text for line in lines if line.kind is ProgressKind.NOTE]


def test_each_phase_is_launched_on_the_network_it_asks_for(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", PHASES)
    clone = sc_node.start("acme/app#1")
    launcher = NetworkLog()
    with serving(sc_node, launcher=launcher):
        record = wait_state(sc_home, clone.id, State.DONE)
    assert launcher.networks == [NetworkMode.OPEN, NetworkMode.MODEL_ONLY, NetworkMode.OPEN]
    assert record.handoffs == 2 and record.report == "three phases"
    assert notes(sc_home, clone.id) == [
        "phase on network open",
        "phase on network model-only",
        "phase on network open",
    ]
    assert not RunFolder(sc_home.clones_dir / clone.id).handoff_file.exists()


def test_a_phased_launcher_ends_each_phase_and_removes_the_clone_once_at_its_end(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", PHASES)
    clone = sc_node.start("acme/app#1")
    launcher = Phased()
    assert isinstance(launcher, PhasedLauncher)
    with serving(sc_node, launcher=launcher):
        wait_state(sc_home, clone.id, State.DONE)
        wait_until(lambda: "remove" in launcher.calls, "the clone removed")
    phases = ["launch", "end_phase", "launch", "end_phase", "launch", "remove"]
    assert launcher.calls == phases


def test_a_phase_that_ended_while_serve_was_down_goes_on_when_serve_is_back(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", PHASES)
    clone = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / clone.id)
    # What a serve did before it crashed: launch the clone and record it running.
    folder.write_record(Record(id=clone.id, state=State.RUNNING))
    first = FakeLauncher(default_state_dir())
    first.launch(LaunchSpec(clone.id, folder.path, sc_home.secrets_file, "unused"))
    wait_until(lambda: first.status(clone.id).state is LaunchState.EXITED, "the first phase")
    assert folder.handoff_file.exists()
    time.sleep(0.1)
    launcher = NetworkLog()
    with serving(sc_node, launcher=launcher):
        record = wait_state(sc_home, clone.id, State.DONE)
    assert launcher.networks == [NetworkMode.MODEL_ONLY, NetworkMode.OPEN]
    assert record.handoffs == 2
