"""serve has a clone's launch prepared (its repository's environment image) before it launches
it: the clone is `preparing` meanwhile, with the launcher's lines, holds its slot, can be
stopped, and a failure or a restart of serve loses nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs
import pytest
from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, State, Step
from shadowclone.plugin import LaunchSpec, Outcome, contract
from shadowclone.plugin import PreparingLauncher as PreparingLauncherProtocol
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import set_up
from shadowclone_testing.serving import (
    Scripts,
    record_of,
    serving,
    wait_state,
    wait_until,
)

DECLARED = ".shadowclone/environment.toml"
ENV_IMAGE = "shadowclone-env/acme-app:0123456789abcdef0123"


class PreparingLauncher(FakeLauncher):
    """The fake launcher, with a preparation that says two lines, waits for `gate` (or for
    its cancel) and then makes `ENV_IMAGE`, or raises `failure`."""

    def __init__(self) -> None:
        super().__init__(default_state_dir())
        self.gate = threading.Event()
        self.failure: Exception | None = None
        self.prepared: list[str] = []
        self.cancelled: list[str] = []
        self.launched: dict[str, LaunchSpec] = {}
        self.lock = threading.Lock()

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        if spec.environment is None:
            return spec
        with self.lock:
            self.prepared.append(spec.clone_id)
        say(f"building the environment of {spec.environment.repo}")
        say("#5 [2/3] RUN apt-get install -y jq")
        while not self.gate.wait(0.02):
            if cancel.is_set():
                with self.lock:
                    self.cancelled.append(spec.clone_id)
                raise RuntimeError("cancelled")
        if self.failure is not None:
            raise self.failure
        return attrs.evolve(spec, image=ENV_IMAGE)

    def launch(self, spec: LaunchSpec) -> None:
        with self.lock:
            self.launched[spec.clone_id] = spec
        super().launch(spec)


@pytest.fixture
def launcher() -> PreparingLauncher:
    return PreparingLauncher()


@pytest.fixture
def declared(sc_home: Paths, sc_scripts: Scripts) -> Scripts:
    """Scripts, with acme/app set up declaring an environment."""
    set_up(sc_home, environment=DECLARED)
    return sc_scripts


def prepare_lines(paths: Paths, clone_id: str) -> list[str]:
    lines, _, _ = RunFolder(paths.clones_dir / clone_id).progress()
    return [line.text for line in lines if line.step is Step.PREPARE]


def test_a_clone_is_preparing_with_the_launchers_lines_then_runs_in_the_prepared_image(
    sc_node: LocalNode, sc_home: Paths, declared: Scripts, launcher: PreparingLauncher
) -> None:
    declared.set("acme/app#1", Script(play=Play.FINISH, steps=2))
    clone = sc_node.start("acme/app#1")
    assert RunFolder(sc_home.clones_dir / clone.id).request().environment == DECLARED
    with serving(sc_node, launcher=launcher):
        record = wait_state(sc_home, clone.id, State.PREPARING)
        wait_until(lambda: len(prepare_lines(sc_home, clone.id)) == 2, "the preparation's lines")
        view = sc_node.get(clone.id, lines=5)
        assert view.state is State.PREPARING
        assert launcher.launched == {}
        launcher.gate.set()
        record = wait_state(sc_home, clone.id, State.DONE)
    assert record.outcome is Outcome.DONE
    assert record.image == ENV_IMAGE
    assert launcher.launched[clone.id].image == ENV_IMAGE
    assert launcher.prepared == [clone.id]
    assert prepare_lines(sc_home, clone.id) == [
        "building the environment of acme/app",
        "#5 [2/3] RUN apt-get install -y jq",
    ]


class PushingLauncher(FakeLauncher):
    """A `PreparingLauncher`: its preparation (a push, say) is needed once, whatever the spec;
    a launch before it would fail."""

    def __init__(self) -> None:
        super().__init__(default_state_dir())
        self.pushed = False
        self.asked: list[str] = []

    def needs_prepare(self, spec: LaunchSpec) -> bool:
        self.asked.append(spec.clone_id)
        return not self.pushed

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        say(f"pushing {spec.image}")
        self.pushed = True
        return spec

    def launch(self, spec: LaunchSpec) -> None:
        assert self.pushed, "launched before its push"
        super().launch(spec)


def test_a_launcher_that_needs_it_prepares_a_clone_without_an_environment_once(
    sc_node: LocalNode, sc_home: Paths, sc_scripts: Scripts
) -> None:
    set_up(sc_home)
    sc_scripts.default = Script(play=Play.FINISH)
    sc_scripts.save()
    launcher = PushingLauncher()
    assert isinstance(launcher, PreparingLauncherProtocol)
    with serving(sc_node, launcher=launcher):
        first = sc_node.start("acme/app#1")
        wait_state(sc_home, first.id, State.DONE)
        second = sc_node.start("acme/app#2")  # after the push: nothing to prepare
        wait_state(sc_home, second.id, State.DONE)
    image = RunFolder(sc_home.clones_dir / first.id).request().image
    assert prepare_lines(sc_home, first.id) == [f"pushing {image}"]
    assert prepare_lines(sc_home, second.id) == []
    assert launcher.asked == [first.id, second.id]


def test_a_clone_being_prepared_holds_its_slot(
    sc_node: LocalNode, sc_home: Paths, declared: Scripts, launcher: PreparingLauncher
) -> None:
    declared.default = Script(play=Play.HANG)
    declared.save()
    sc_node = LocalNode(attrs.evolve(sc_node.config, parallel_clones=1), sc_node.paths)
    first = sc_node.start("acme/app#1")
    set_up(sc_home)  # the repository declares no environment any more: no preparation
    second = sc_node.start("acme/app#2")
    with serving(sc_node, launcher=launcher):
        wait_state(sc_home, first.id, State.PREPARING)
        view = sc_node.get(second.id)
        assert view.state is State.QUEUED
        assert "a slot: 1 clones running" in view.waiting_for
        launcher.gate.set()
        wait_state(sc_home, first.id, State.RUNNING)
        sc_node.stop(first.id)
        wait_state(sc_home, second.id, State.RUNNING)
        sc_node.stop(second.id)
        wait_state(sc_home, second.id, State.STOPPED)
    assert launcher.prepared == [first.id]
    assert second.id in launcher.launched
    assert launcher.launched[second.id].environment is None


def test_a_failed_preparation_fails_the_clone_with_why_and_it_never_launches(
    sc_node: LocalNode, sc_home: Paths, declared: Scripts, launcher: PreparingLauncher
) -> None:
    launcher.failure = RuntimeError("docker could not build acme/app's environment (exit 1)")
    launcher.gate.set()
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, launcher=launcher):
        record = wait_state(sc_home, clone.id, State.FAILED)
    assert record.reason == (
        "its launch could not be prepared: docker could not build acme/app's environment (exit 1)"
    )
    assert launcher.launched == {}
    assert not (sc_home.active_dir / clone.id).exists()
    assert sc_node.start("acme/app#1").state is State.QUEUED  # the issue is free again


def test_a_clone_stopped_while_it_is_prepared_cancels_the_preparation_and_never_runs(
    sc_node: LocalNode, sc_home: Paths, declared: Scripts, launcher: PreparingLauncher
) -> None:
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, launcher=launcher):
        wait_state(sc_home, clone.id, State.PREPARING)
        sc_node.stop(clone.id)
        assert sc_node.get(clone.id).state is State.PREPARING  # serve records the stop
        record = wait_state(sc_home, clone.id, State.STOPPED)
    assert record.reason == "stopped before it started" and record.started_at is None
    assert launcher.cancelled == [clone.id]
    assert launcher.launched == {}


def test_serve_restarted_while_a_clone_is_prepared_prepares_it_again_and_launches_it_once(
    sc_node: LocalNode, sc_home: Paths, declared: Scripts, launcher: PreparingLauncher
) -> None:
    declared.set("acme/app#1", Script(play=Play.FINISH, steps=1))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, launcher=launcher):
        wait_state(sc_home, clone.id, State.PREPARING)
    record = record_of(sc_home, clone.id)
    assert record is not None and record.state is State.PREPARING
    launcher.gate.set()
    with serving(sc_node, launcher=launcher):
        record = wait_state(sc_home, clone.id, State.DONE)
    assert launcher.prepared == [clone.id, clone.id]
    assert list(launcher.launched) == [clone.id]
    assert record.image == ENV_IMAGE


def test_the_fake_launcher_says_it_builds_no_environment_and_runs_the_clone(
    sc_node: LocalNode, sc_home: Paths, declared: Scripts
) -> None:
    declared.set("acme/app#1", Script(play=Play.FINISH, steps=1))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        record = wait_state(sc_home, clone.id, State.DONE)
    assert record.image is None
    lines = prepare_lines(sc_home, clone.id)
    assert lines and "runs no image" in lines[0]
    progress, _, _ = RunFolder(sc_home.clones_dir / clone.id).progress()
    assert progress[0].step is Step.PREPARE and progress[0].kind is ProgressKind.NOTE


def test_serve_hands_the_launcher_the_run_contract(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, launcher: PreparingLauncher
) -> None:
    """What every launcher gets from serve: the clone's id in `env`, its labels and folders."""
    sc_ready.set("acme/app#1", Script(play=Play.FINISH))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, launcher=launcher):
        wait_state(sc_home, clone.id, State.DONE)
    spec = launcher.launched[clone.id]
    assert spec.env == {contract.CLONE_ID_VARIABLE: clone.id}
    assert spec.labels == {contract.LABEL_CLONE: clone.id, contract.LABEL_TARGET: "acme/app#1"}
    assert (spec.run_folder, spec.secrets_file) == (
        sc_home.clones_dir / clone.id,
        sc_home.secrets_file,
    )
