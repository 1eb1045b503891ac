"""serve's spares, with a fake launcher that keeps them: one waits per kind of clone launched
last, the next start of that kind takes it and its launch takes it up, and serve leaves none
of its own behind and removes what no clone will take."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import pytest
from shadowclone.config import Paths
from shadowclone.node import spares
from shadowclone.node.ids import new_clone_id
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import State, now
from shadowclone.plugin import LaunchSpec, PluginUnavailable, SpareLauncher
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.serving import FAST, Scripts, serving, wait_state, wait_until

QUICK = attrs.evolve(FAST, spare_delay_s=0.0)
HANG = Script(play=Play.HANG)


class SparingLauncher(FakeLauncher):
    """The fake launcher, keeping spares: what it was asked, by folder identity."""

    def __init__(self) -> None:
        super().__init__(default_state_dir())
        self.kept: dict[int, LaunchSpec] = {}
        self.taken: list[str] = []
        self.dropped: list[Path] = []
        self.swept: list[list[Path]] = []
        self.lock = threading.Lock()

    def keep_spare(self, spec: LaunchSpec) -> None:
        with self.lock:
            self.kept[os.stat(spec.run_folder).st_ino] = spec

    def drop_spare(self, folder: Path) -> None:
        with self.lock:
            self.kept.pop(os.stat(folder).st_ino, None)
            self.dropped.append(folder)

    def drop_spares(self, keep: Sequence[Path]) -> list[str]:
        kept = {os.stat(folder).st_ino for folder in keep if folder.exists()}
        with self.lock:
            self.swept.append(list(keep))
            gone = [inode for inode in self.kept if inode not in kept]
            for inode in gone:
                del self.kept[inode]
        return [f"spare {inode}" for inode in gone]

    def launch(self, spec: LaunchSpec) -> None:
        with self.lock:
            if self.kept.pop(os.stat(spec.run_folder).st_ino, None) is not None:
                self.taken.append(spec.clone_id)
        super().launch(spec)

    def waiting(self) -> int:
        with self.lock:
            return len(self.kept)


@pytest.fixture
def launcher(sc_home: Paths, sc_scripts: Scripts) -> SparingLauncher:
    """The sparing launcher, its clones hanging until stopped, acme/app set up."""
    set_up(sc_home)
    sc_scripts.default = HANG
    sc_scripts.save()
    return SparingLauncher()


def test_the_fake_launcher_keeping_spares_is_a_spare_launcher() -> None:
    assert isinstance(SparingLauncher(), SpareLauncher)
    assert not isinstance(FakeLauncher(default_state_dir()), SpareLauncher)


def test_the_next_clone_of_a_kind_takes_the_spare_its_last_launch_left(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    with serving(sc_node, QUICK, launcher):
        first = sc_node.start("acme/app#1").id
        wait_state(sc_home, first, State.RUNNING)
        (spare,) = wait_until(lambda: list(spares.waiting(sc_home.clones_dir)), "a spare")
        wait_until(launcher.waiting, "the spare's container")
        [spec] = launcher.kept.values()
        assert spec.run_folder == spare and spec.clone_id == spare.name
        assert not spec.labels and not spec.env, "nothing of the first clone"
        identity = os.stat(spare).st_ino

        second = sc_node.start("acme/app#2").id
        assert os.stat(sc_home.clones_dir / second).st_ino == identity
        wait_state(sc_home, second, State.RUNNING)
        assert launcher.taken == [second]
        # ...and a new spare waits for the third.
        wait_until(lambda: len(list(spares.waiting(sc_home.clones_dir))) == 1, "the next spare")
        sc_node.stop(first)
        sc_node.stop(second)
        wait_state(sc_home, first, State.STOPPED)
        wait_state(sc_home, second, State.STOPPED)
    assert list(spares.waiting(sc_home.clones_dir)) == [], "serve gives its spares up as it stops"
    assert list(spares.given_up(sc_home.clones_dir)) == []
    assert launcher.waiting() == 0


def test_at_most_spares_kinds_wait_the_last_launched_kept(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    for repo in ("acme/a", "acme/b", "acme/c"):
        set_up(sc_home, repo=repo)
    sc_node = LocalNode(attrs.evolve(sc_node.config, spares=2, parallel_clones=3), sc_node.paths)
    with serving(sc_node, QUICK, launcher):
        ids = []
        for repo in ("acme/a", "acme/b", "acme/c"):
            ids.append(sc_node.start(f"{repo}#1").id)
            wait_state(sc_home, ids[-1], State.RUNNING)
            kind = spares.spare_kind(RunFolder(sc_home.clones_dir / ids[-1]).request())

            def made(kind: str | None = kind) -> list[Path]:
                return list(spares.waiting(sc_home.clones_dir, kind))

            wait_until(made, f"{repo}'s spare")
        waiting = {p.name.partition(".")[0] for p in spares.waiting(sc_home.clones_dir)}
        kinds = [spares.spare_kind(RunFolder(sc_home.clones_dir / i).request()) for i in ids]
        assert waiting == set(kinds[1:]), "the oldest kind's spare is given up"
        wait_until(lambda: launcher.waiting() == 2, "two spares' containers")
        assert len(launcher.dropped) == 1
        for clone_id in ids:
            sc_node.stop(clone_id)
        for clone_id in ids:
            wait_state(sc_home, clone_id, State.STOPPED)


def test_with_no_spares_configured_serve_keeps_none(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    sc_node = LocalNode(attrs.evolve(sc_node.config, spares=0), sc_node.paths)
    with serving(sc_node, QUICK, launcher):
        first = sc_node.start("acme/app#1").id
        wait_state(sc_home, first, State.RUNNING)
        sc_node.stop(first)
        wait_state(sc_home, first, State.STOPPED)
    assert launcher.kept == {} and list(spares.waiting(sc_home.clones_dir)) == []


def test_serve_removes_what_an_earlier_one_left_but_a_queued_clones_spare(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    probe = sc_node.start("acme/app#9").id
    sc_node.stop(probe)
    kind = spares.spare_kind(RunFolder(sc_home.clones_dir / probe).request())
    assert kind is not None

    def kept(folder: Path) -> tuple[int, str]:
        launcher.keep_spare(attrs.evolve(SPEC, clone_id=folder.name, run_folder=folder))
        return os.stat(folder).st_ino, folder.name

    # What a serve killed left: a spare taken by a clone still queued, one taken by a start
    # that died before its request, one still waiting, and one given up.
    queued_spare = kept(spares.make_spare(sc_home.clones_dir, kind))
    queued = sc_node.start("acme/app#1").id
    died_spare = kept(spares.make_spare(sc_home.clones_dir, kind))
    assert spares.take_spare(sc_home.clones_dir, kind, sc_home.clones_dir / new_clone_id(now()))
    waiting_spare = kept(spares.make_spare(sc_home.clones_dir, kind))
    hidden = spares.give_up(spares.make_spare(sc_home.clones_dir, "0" * 16))
    assert hidden is not None

    with serving(sc_node, QUICK, launcher):
        wait_state(sc_home, queued, State.RUNNING)
        assert launcher.taken == [queued], "the queued clone's launch takes its spare up"
        assert os.stat(sc_home.clones_dir / queued).st_ino == queued_spare[0]
        with launcher.lock:
            # By name: a spare made since may have the number of a folder removed meanwhile.
            still = {spec.clone_id for spec in launcher.kept.values()}
            assert not {died_spare[1], waiting_spare[1]} & still
        assert not hidden.exists()
        sc_node.stop(queued)
        wait_state(sc_home, queued, State.STOPPED)


SPEC = LaunchSpec(clone_id="spare", run_folder=Path("/"), secrets_file=Path("/"), image="i")


def test_status_says_how_many_spares_wait(sc_cli: Callable[..., CliResult], sc_home: Paths) -> None:
    set_up(sc_home)
    assert "spares" not in {c["name"] for c in json.loads(sc_cli("status", "--json").out)["checks"]}
    spares.make_spare(sc_home.clones_dir, "0" * 16)
    spares.make_spare(sc_home.clones_dir, "1" * 16)
    checks = {c["name"]: c for c in json.loads(sc_cli("status", "--json").out)["checks"]}
    assert checks["spares"]["detail"] == (
        "2 started ahead for the next clone of a kind; spares = 2"
    )


def test_a_serve_that_starts_keeps_spares_for_the_kinds_requested_last(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    for repo in ("acme/a", "acme/b", "acme/c"):
        set_up(sc_home, repo=repo)
    kinds: list[str | None] = []
    for repo in ("acme/a", "acme/b", "acme/c", "acme/c"):
        clone_id = sc_node.start(f"{repo}#{len(kinds) + 1}").id
        sc_node.stop(clone_id)  # never launched: its request is all serve reads
        kinds.append(spares.spare_kind(RunFolder(sc_home.clones_dir / clone_id).request()))
    with serving(sc_node, QUICK, launcher):
        wait_until(lambda: launcher.waiting() == 2, "two spares' containers")
        waiting = {p.name.partition(".")[0] for p in spares.waiting(sc_home.clones_dir)}
        assert waiting == {kinds[1], kinds[2]}, "the two kinds requested last, once each"
        view = sc_node.start("acme/c#9")
        wait_state(sc_home, view.id, State.RUNNING)
        assert launcher.taken == [view.id]
        sc_node.stop(view.id)
        wait_state(sc_home, view.id, State.STOPPED)
    assert list(spares.waiting(sc_home.clones_dir)) == []


class FailingLauncher(SparingLauncher):
    def keep_spare(self, spec: LaunchSpec) -> None:
        with self.lock:
            self.kept[os.stat(spec.run_folder).st_ino] = spec  # started half-way, then fails
        raise PluginUnavailable("Docker could not start a spare")


def test_a_spare_the_launcher_cannot_start_is_given_up_and_clones_go_on(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    launcher = FailingLauncher()  # the fixture's hanging clones, with this launcher
    with serving(sc_node, QUICK, launcher):
        first = sc_node.start("acme/app#1").id
        wait_state(sc_home, first, State.RUNNING)
        wait_until(lambda: launcher.dropped, "the failed spare to be dropped")
        assert list(spares.waiting(sc_home.clones_dir)) == []
        assert list(spares.given_up(sc_home.clones_dir)) == []
        assert launcher.waiting() == 0
        second = sc_node.start("acme/app#2").id
        wait_state(sc_home, second, State.RUNNING)
        for clone_id in (first, second):
            sc_node.stop(clone_id)
            wait_state(sc_home, clone_id, State.STOPPED)


def test_serve_sweeps_spares_no_clone_will_take_and_keeps_a_queued_clones(
    sc_node: LocalNode, sc_home: Paths, launcher: SparingLauncher
) -> None:
    sc_node = LocalNode(attrs.evolve(sc_node.config, parallel_clones=1), sc_node.paths)
    with serving(sc_node, attrs.evolve(QUICK, spare_sweep_s=0.1), launcher):
        first = sc_node.start("acme/app#1").id
        wait_state(sc_home, first, State.RUNNING)
        wait_until(launcher.waiting, "a spare")
        queued = sc_node.start("acme/app#2").id  # takes the spare, and waits for the first
        taken = os.stat(sc_home.clones_dir / queued).st_ino
        assert taken in launcher.kept
        # A start that died between taking a spare and writing its request.
        died = spares.make_spare(sc_home.clones_dir, "0" * 16)
        launcher.keep_spare(attrs.evolve(SPEC, clone_id=died.name, run_folder=died))
        orphan = os.stat(died).st_ino
        folder = sc_home.clones_dir / new_clone_id(now())
        folder.mkdir()
        assert spares.take_spare(sc_home.clones_dir, "0" * 16, folder)

        def swept() -> bool:
            with launcher.lock:
                return orphan not in launcher.kept

        wait_until(swept, "the orphan spare to be removed")
        with launcher.lock:
            assert taken in launcher.kept, "the queued clone's spare stays"
        sc_node.stop(first)
        wait_state(sc_home, queued, State.RUNNING)
        assert launcher.taken == [queued]
        sc_node.stop(queued)
        wait_state(sc_home, queued, State.STOPPED)
