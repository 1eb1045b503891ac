"""serve against hostile run folders: each broken clone is skipped and reported, serve stays up,
and every healthy clone beside them runs to its end.

Two ways in: the real serve (on a thread, the fake launcher, real clone processes) with one
broken clone for every kind of file and every oddity; and serve's readers under hypothesis
(recover, a pass over changed clones, a rescan) with a launcher that only remembers, so that
many generated inputs cost little.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths, load_config
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, State, write
from shadowclone.plugin import CloneStatus, LaunchSpec, LaunchState
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone.serve.loop import Server
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import set_up
from shadowclone_testing.hostile import (
    ODDITIES,
    RUN_FOLDER_KINDS,
    SENTINEL,
    apply_edit,
    fill_run_folder,
    home_env,
    hostile_edits,
    make_odd,
    snapshot,
)
from shadowclone_testing.serving import FAST, Scripts, serving, wait_state, wait_until


def broken_clone(node: LocalNode, number: int) -> str:
    """A clone serve will take up at its start: a run folder with every file, its record
    `running` (which the launcher does not know: it ends as vanished unless it is skipped)."""
    clone_id = node.start(f"acme/app#{number}").id
    folder = RunFolder(node.paths.clones_dir / clone_id)
    fill_run_folder(folder, clone_id)
    write(folder.record_file, Record(id=clone_id, state=State.RUNNING))
    return clone_id


def test_serve_skips_every_hostile_clone_and_runs_the_healthy_ones(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, tmp_path: Path
) -> None:
    sc_ready.default = Script(play=Play.FINISH, steps=1)
    sc_ready.save()
    outside = tmp_path / "outside"
    outside.mkdir()
    broken: dict[str, str] = {}
    number = 100
    for kind in (*RUN_FOLDER_KINDS, "<run folder>", "<active marker>"):
        for oddity in ODDITIES:
            number += 1
            clone_id = broken_clone(sc_node, number)
            make_odd(sc_home, clone_id, kind, oddity, outside)
            broken[clone_id] = f"{kind} {oddity}"
    healthy = sc_node.start("acme/app#1").id
    before = snapshot(outside)
    with serving(sc_node) as serve:
        assert wait_state(sc_home, healthy, State.DONE).outcome is not None
        # A clone broken while serve follows it: serve goes on with the next one.
        sc_ready.set("acme/app#2", Script(play=Play.HANG))
        running = sc_node.start("acme/app#2").id
        wait_state(sc_home, running, State.RUNNING)
        make_odd(sc_home, running, "progress.jsonl", "fifo", outside)
        later = sc_node.start("acme/app#3").id
        assert wait_state(sc_home, later, State.DONE).outcome is not None
        log = wait_until(
            lambda: (
                f"clone {running} is skipped" in sc_home.serve_log.read_text()
                and sc_home.serve_log.read_text()
            ),
            "serve to report the clone it cannot follow",
        )
        serve.raise_errors()
    assert snapshot(outside) == before, "serve wrote outside the home"
    assert SENTINEL not in log
    for clone_id, what in broken.items():
        if what == "<run folder> folder":
            continue  # a folder with no request: a start that died, which the next start clears
        try:
            record = RunFolder(sc_home.clones_dir / clone_id).record()
        except Exception:  # noqa: BLE001 - an unreadable record: serve must have said so
            record = None
        ended = record is not None and not record.state.active
        assert ended or f"clone {clone_id} is skipped" in log, f"{what}: neither ended nor reported"
        if record is not None:
            assert SENTINEL not in record.reason + record.output_tail, what


@attrs.define
class RememberingLauncher:
    """A launcher that runs nothing: it remembers what it launched, each `running`."""

    launched: dict[str, LaunchSpec] = attrs.field(factory=dict)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def check(self) -> None:
        return None

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        return spec

    def host_address(self) -> str:
        return "127.0.0.1"

    def reap_strays(self) -> list[str]:
        return []

    def launch(self, spec: LaunchSpec) -> None:
        with self.lock:
            self.launched[spec.clone_id] = spec

    def status(self, clone_id: str) -> CloneStatus:
        state = LaunchState.RUNNING if clone_id in self.launched else LaunchState.MISSING
        return CloneStatus(clone_id, state)

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        self.remove(clone_id)

    def remove(self, clone_id: str) -> None:
        with self.lock:
            self.launched.pop(clone_id, None)

    def running(self) -> Sequence[CloneStatus]:
        with self.lock:
            return [CloneStatus(i, LaunchState.RUNNING) for i in self.launched]


@pytest.fixture
def serve_template(sc_home: Paths) -> tuple[Path, str, str]:
    """A home with a broken-to-be clone and a healthy queued one (copied for each input)."""
    set_up(sc_home)
    node = local_node(sc_home)
    victim = broken_clone(node, 1)
    healthy = node.start("acme/app#2").id
    return sc_home.config_file.parent, victim, healthy


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=st.lists(hostile_edits(), min_size=1, max_size=3), late=st.booleans())
def test_serve_readers_take_any_hostile_input_and_go_on(
    serve_template: tuple[Path, str, str],
    tmp_path: Path,
    edits: list[tuple[str, str, Any]],
    late: bool,
) -> None:
    """`late`: the files turn hostile after serve took the clone up, not before."""
    root, victim, healthy = serve_template
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root, work / "home", symlinks=True)
    (work / "outside").mkdir()
    with home_env(work / "home") as default:
        config, paths = load_config(default)
        launcher = RememberingLauncher()
        launcher.launch(
            LaunchSpec(
                clone_id=victim,
                run_folder=paths.clones_dir / victim,
                secrets_file=paths.secrets_file,
                image="x",
            )
        )
        server = Server(config, paths, launcher, FAST, clock=lambda: datetime.now(UTC))
        if late:
            server.recover()
        for edit in edits:
            apply_edit(paths, victim, edit, work / "outside")
        before = snapshot(work / "outside")
        if not late:
            server.recover()
        server.launch_queued()
        server.step({victim, healthy})
        server.rescan()
        server.step({victim})
        assert healthy in launcher.launched, "the healthy clone was not launched"
        assert server.clones[healthy].record.state is State.RUNNING
        assert snapshot(work / "outside") == before
