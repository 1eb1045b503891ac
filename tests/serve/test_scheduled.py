"""Long waits through serve: a clone that exits to wait for its login's usage limit (a handoff
`resume: session`) has nothing running, is neither failed nor launched again before its time,
and is launched again at the reset, at the owner's `resume` or `stop`, across serve restarts."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import attrs
from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, State
from shadowclone.plugin import LaunchSpec, LaunchState, Outcome
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.serving import (
    FAST,
    Scripts,
    record_of,
    serving,
    state_of,
    wait_state,
    wait_until,
)


class Launches(FakeLauncher):
    """The fake launcher, remembering when each launch came."""

    def __init__(self) -> None:
        super().__init__(default_state_dir())
        self.at: list[datetime] = []

    def launch(self, spec: LaunchSpec) -> None:
        self.at.append(datetime.now(UTC))
        super().launch(spec)


def nothing_running(clone_id: str) -> bool:
    return FakeLauncher(default_state_dir()).status(clone_id).state is LaunchState.MISSING


def waiting(home: Paths, clone_id: str) -> Record:
    """The clone's record once it waits with nothing running."""
    record = wait_state(home, clone_id, State.SCHEDULED)
    wait_until(lambda: nothing_running(clone_id), "what the launcher kept to be removed")
    return record


def test_a_waiting_clone_runs_nothing_and_is_launched_again_at_the_reset(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.WAIT, wait_s=3.0))
    clone = sc_node.start("acme/app#1")
    launcher = Launches()
    with serving(sc_node, launcher=launcher):
        record = waiting(sc_home, clone.id)
        until = record.scheduled_until
        assert until is not None
        time.sleep(1.0)  # several polls and rescans: nothing of it runs, and that is no end
        assert state_of(sc_home, clone.id) is State.SCHEDULED
        assert len(launcher.at) == 1
        record = wait_state(sc_home, clone.id, State.DONE, State.FAILED)
    assert (record.state, record.report) == (State.DONE, "went on at the reset; messages []")
    assert len(launcher.at) == 2 and launcher.at[1] >= until
    assert sc_ready.starts() == [clone.id, clone.id]
    assert record.scheduled_until is None and record.handoffs == 0
    assert not RunFolder(sc_home.clones_dir / clone.id).handoff_file.exists()


def test_a_waiting_clone_outlives_serve_restarts_and_the_owners_resume_launches_it(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    """Waiting an hour: serve stops and starts again, the owner sends a message while no serve
    runs and another while the clone waits; `resume` launches it at once, and it has both."""
    sc_ready.set("acme/app#1", Script(play=Play.WAIT, wait_s=3600.0))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        waiting(sc_home, clone.id)
    sc_node.send(clone.id, "sent while no serve ran")
    with serving(sc_node):
        time.sleep(1.0)
        assert state_of(sc_home, clone.id) is State.SCHEDULED
        sc_node.send(clone.id, "sent while it waits")
        time.sleep(0.5)
        assert state_of(sc_home, clone.id) is State.SCHEDULED and nothing_running(clone.id)
    with serving(sc_node):
        time.sleep(0.5)
        assert state_of(sc_home, clone.id) is State.SCHEDULED
        sc_node.resume(clone.id)
        record = wait_state(sc_home, clone.id, State.DONE, State.FAILED)
    assert record.report == (
        "resumed by the owner; messages ['sent while no serve ran', 'sent while it waits']"
    )
    assert sc_ready.starts() == [clone.id, clone.id]


def test_a_clone_that_exited_to_wait_while_serve_was_down_waits_and_a_stop_ends_it(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    """serve was down as the clone exited: the next one removes what the launcher kept and
    follows the clone waiting; a stop launches it at once, and it ends stopped."""
    sc_ready.set("acme/app#1", Script(play=Play.WAIT, wait_s=3600.0))
    clone = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / clone.id)
    # What a serve did before it crashed: launch the clone and record it running.
    folder.write_record(Record(id=clone.id, state=State.RUNNING))
    first = FakeLauncher(default_state_dir())
    first.launch(LaunchSpec(clone.id, folder.path, sc_home.secrets_file, "unused"))
    wait_until(lambda: first.status(clone.id).state is LaunchState.EXITED, "the first launch")
    launcher = Launches()
    # The clone launched for the stop ends by itself; FAST's 2 s grace before serve stops it
    # was not enough for it on a busy machine (it ended killed, with no report).
    settings = attrs.evolve(FAST, stop_grace_s=60.0)
    with serving(sc_node, settings, launcher=launcher):
        record = waiting(sc_home, clone.id)
        assert record.scheduled_until is not None and record.reason == ""
        assert launcher.at == []
        sc_node.stop(clone.id)
        record = wait_state(sc_home, clone.id, State.STOPPED, State.FAILED)
    assert (record.state, record.outcome) == (State.STOPPED, Outcome.STOPPED)
    assert record.report == "stopped while waiting; messages []"
    assert len(launcher.at) == 1
    assert record_of(sc_home, clone.id) == record
