"""serve with the fake launcher: the queue, records, stops, deliveries and the lock, on a real
clones folder with clones as real local processes."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
from shadowclone import files
from shadowclone.cli.app import describe
from shadowclone.config import Paths
from shadowclone.errors import PluginUnavailable, Refused
from shadowclone.node.ids import new_clone_id
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    InboxKind,
    ProgressKind,
    ProgressLine,
    Record,
    Request,
    State,
    Step,
    Usage,
)
from shadowclone.node.target import Target
from shadowclone.plugin import LaunchSpec, LaunchState, Outcome
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone.serve.loop import serve_clones
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import set_up
from shadowclone_testing.serving import (
    FAST,
    Scripts,
    ServeProcess,
    record_of,
    serving,
    state_of,
    wait_state,
    wait_until,
)

HANG = Script(play=Play.HANG)
ECHO = Script(play=Play.ECHO)


def with_parallel(node: LocalNode, parallel: int) -> LocalNode:
    return LocalNode(attrs.evolve(node.config, parallel_clones=parallel), node.paths)


def queue(
    paths: Paths, number: int, *, one_at_a_time: bool = False, login: str = "no-login"
) -> str:
    """Queue a clone the way `start` does (marker, then request), with any login's limits."""
    at = datetime.now(UTC)
    clone_id = new_clone_id(at)
    folder = RunFolder(paths.clones_dir / clone_id)
    folder.path.mkdir(parents=True)
    target = Target("acme", "app", number)
    paths.active_dir.mkdir(parents=True, exist_ok=True)
    files.write_atomic(paths.active_dir / clone_id, target.key.encode())
    folder.write_request(
        Request(
            id=clone_id,
            target=target,
            engine="scripted",
            login=login,
            launcher="fake",
            image="unused",
            github_url="https://github.com",
            github_api_url="https://api.github.com",
            requested_at=at,
            one_at_a_time=one_at_a_time,
        )
    )
    return clone_id


def launch_order(paths: Paths, ids: list[str]) -> list[str]:
    """The clones in the order serve launched them (`started_at` of their records)."""
    started = {}
    for clone_id in ids:
        record = record_of(paths, clone_id)
        assert record is not None and record.started_at is not None, clone_id
        started[clone_id] = record.started_at
    return sorted(ids, key=started.__getitem__)


def progress_texts(paths: Paths, clone_id: str, kind: ProgressKind) -> list[str]:
    lines, _, _ = RunFolder(paths.clones_dir / clone_id).progress()
    return [line.text for line in lines if line.kind is kind]


def test_a_clone_runs_and_serve_records_how_it_ended(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.FINISH, steps=3, pr_url="https://x/pull/9"))
    clone = sc_node.start("acme/app#1")
    assert record_of(sc_home, clone.id) is None  # only serve writes records
    with serving(sc_node):
        record = wait_state(sc_home, clone.id, State.DONE)
    assert record.outcome is Outcome.DONE
    assert record.exit_code == 0
    assert record.pr_url == "https://x/pull/9"
    assert record.report == "all done"
    assert record.started_at is not None and record.ended_at is not None
    assert record.started_at <= record.ended_at
    assert record.last_progress is not None and record.last_progress.final
    assert not (sc_home.active_dir / clone.id).exists()
    assert FakeLauncher(default_state_dir()).status(clone.id).state is LaunchState.MISSING
    view = sc_node.get(clone.id)
    assert (view.state, view.pr_url) == (State.DONE, "https://x/pull/9")
    assert sc_ready.starts() == [clone.id]


def test_queued_clones_start_in_request_order_within_parallel_clones(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.default = HANG
    sc_ready.save()
    sc_node = with_parallel(sc_node, 2)
    ids = [sc_node.start(f"acme/app#{n}").id for n in range(1, 6)]
    with serving(sc_node):
        wait_state(sc_home, ids[0], State.RUNNING)
        wait_state(sc_home, ids[1], State.RUNNING)
        # The queued ones first: a running clone's stop frees its place, which a queued
        # clone not yet told to stop would rightly take.
        for clone_id in reversed(ids):
            sc_node.stop(clone_id)
        for clone_id in ids:
            wait_state(sc_home, clone_id, State.STOPPED)
    records = [record_of(sc_home, clone_id) for clone_id in ids]
    assert all(r is not None for r in records)
    # Two ran, launched in request order (their processes may start in either order); the
    # stop reached the rest while they were queued, and they never started.
    assert sorted(sc_ready.starts()) == sorted(ids[:2])
    assert [r.started_at is not None for r in records if r] == [True, True, False, False, False]
    assert launch_order(sc_home, ids[:2]) == ids[:2]


def test_parallel_clones_bounds_the_running_clones_and_order_is_kept(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.default = Script(play=Play.FINISH, steps=2, delay_s=0.2)
    sc_ready.save()
    sc_node = with_parallel(sc_node, 2)
    ids = [sc_node.start(f"acme/app#{n}").id for n in range(1, 5)]
    with serving(sc_node):
        for clone_id in ids:
            wait_state(sc_home, clone_id, State.DONE)
    assert sorted(sc_ready.starts()) == sorted(ids)
    assert launch_order(sc_home, ids) == ids
    spans = []
    for clone_id in ids:
        record = record_of(sc_home, clone_id)
        assert record is not None and record.started_at and record.ended_at
        spans.append((record.started_at, record.ended_at))
    for start, _ in spans:
        overlapping = [1 for s, e in spans if s <= start < e]
        assert len(overlapping) <= 2


def test_a_login_for_one_clone_at_a_time_runs_its_clones_one_by_one(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.default = HANG
    sc_ready.save()
    sc_node = with_parallel(sc_node, 3)
    first = queue(sc_home, 1, one_at_a_time=True, login="chatgpt-plan")
    second = queue(sc_home, 2, one_at_a_time=True, login="chatgpt-plan")
    other = queue(sc_home, 3)
    with serving(sc_node):
        wait_state(sc_home, first, State.RUNNING)
        wait_state(sc_home, other, State.RUNNING)  # the later request goes ahead
        assert state_of(sc_home, second) is State.QUEUED
        sc_node.stop(first)
        wait_state(sc_home, first, State.STOPPED)
        wait_state(sc_home, second, State.RUNNING)
        wait_until(lambda: second in sc_ready.starts(), "the second clone to start")
        sc_node.stop(second)
        sc_node.stop(other)
        wait_state(sc_home, second, State.STOPPED)
        wait_state(sc_home, other, State.STOPPED)
    # first and other are launched together and may start in either order; second only
    # once first has stopped.
    starts = sc_ready.starts()
    assert sorted(starts[:2]) == sorted([first, other]) and starts[2:] == [second]


def test_a_queued_clone_with_a_stop_marker_never_starts(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.default = HANG
    sc_ready.save()
    sc_node = with_parallel(sc_node, 1)
    early = sc_node.start("acme/app#1")
    sc_node.stop(early.id)  # stopped before any serve ran
    running = sc_node.start("acme/app#2")
    waiting = sc_node.start("acme/app#3")
    with serving(sc_node):
        wait_state(sc_home, running.id, State.RUNNING)
        record = wait_state(sc_home, early.id, State.STOPPED)
        assert record.started_at is None and record.reason == "stopped before it started"
        sc_node.stop(waiting.id)
        record = wait_state(sc_home, waiting.id, State.STOPPED)
        assert record.started_at is None
        sc_node.stop(running.id)
        wait_state(sc_home, running.id, State.STOPPED)
    assert sc_ready.starts() == [running.id]


def test_a_running_clone_stopped_saves_its_work_and_is_recorded_stopped(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", HANG)
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.RUNNING)
        sc_node.stop(clone.id)
        record = wait_state(sc_home, clone.id, State.STOPPED)
    assert record.outcome is Outcome.STOPPED
    assert record.exit_code == 0
    assert record.report == "stopped as asked"  # its own final line: it saved its work
    assert record.last_progress is not None and record.last_progress.final


def test_a_clone_that_ignores_the_stop_is_ended_by_its_launcher_after_the_grace(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.HANG, ignore_stop=True))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.RUNNING)
        sc_node.stop(clone.id)
        record = wait_state(sc_home, clone.id, State.STOPPED)
    assert record.outcome is Outcome.STOPPED
    assert record.exit_code == 137  # SIGKILL, after SIGTERM was ignored
    assert record.reason == "stopped before it wrote a final progress line"
    assert FakeLauncher(default_state_dir()).running() == []


def test_a_clone_that_exits_with_no_final_line_is_failed_with_its_output_kept(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.NO_FINAL, exit_code=3, output="kaboom\nat line 7"))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        record = wait_state(sc_home, clone.id, State.FAILED, State.DONE)
    assert record.state is State.FAILED
    assert record.outcome is Outcome.FAILED
    assert record.exit_code == 3
    assert "kaboom" in record.output_tail and "at line 7" in record.output_tail
    assert "no final progress line" in record.reason
    view = sc_node.get(clone.id)
    assert "kaboom" in view.output_tail


def test_messages_reach_the_running_clone_once_each_in_order(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", ECHO)
    clone = sc_node.start("acme/app#1")
    early = sc_node.send(clone.id, "sent while queued")
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.RUNNING)
        wait_until(
            lambda: progress_texts(sc_home, clone.id, ProgressKind.MESSAGE) == [early.text],
            "the queued message to reach the clone",
        )
        later = [sc_node.send(clone.id, f"message {n}") for n in range(5)]
        sc_node.send(clone.id, "bye")
        record = wait_state(sc_home, clone.id, State.DONE)
    echoed = progress_texts(sc_home, clone.id, ProgressKind.MESSAGE)
    assert echoed == [early.text, *(line.text for line in later), "bye"]
    folder = RunFolder(sc_home.clones_dir / clone.id)
    inbox, _, _ = folder.inbox()
    delivered, problems, _ = folder.deliveries()
    assert [line.id for line in delivered] == [line.id for line in inbox]
    assert problems == []
    assert record.report == "all done"


def test_a_question_shows_the_clone_waiting_until_the_answer_arrives(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        record = wait_state(sc_home, clone.id, State.WAITING)
        assert record.question is not None and record.question.id == "q1"
        assert sc_node.get(clone.id).question is not None
        line = sc_node.answer(clone.id, "q1", "right")
        assert line.kind is InboxKind.ANSWER
        record = wait_state(sc_home, clone.id, State.DONE)
    assert record.report == "answered right"
    assert record.question is None


def test_a_second_serve_is_refused_naming_the_process_that_holds_the_lock(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    with serving(sc_node), pytest.raises(Refused) as refused:
        serve_clones(sc_node.config, sc_node.paths, registry=sc_node.registry, settings=FAST)
    assert f"process {os.getpid()} holds" in str(refused.value)
    assert str(sc_home.serve_lock) in str(refused.value)


def test_a_second_serve_process_refuses_with_one_line_naming_the_pid(
    sc_home: Paths, sc_ready: Scripts
) -> None:
    first = ServeProcess.start(sc_home)
    try:
        first.wait_serving()
        second = ServeProcess.start(sc_home)
        assert second.popen.wait(60) == 1
        assert second.output.strip().splitlines() == [
            f"shadowclone: serve is already running on this machine: process {first.pid} "
            f"holds {sc_home.serve_lock}"
        ]
    finally:
        code = first.end()
    assert code == 0, first.output


def test_sigterm_stops_serve_and_the_next_serve_goes_on_with_its_clones(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", ECHO)
    clone = sc_node.start("acme/app#1")
    process = ServeProcess.start(sc_home)
    try:
        process.wait_serving()
        wait_state(sc_home, clone.id, State.RUNNING)
    finally:
        code = process.end()
    assert code == 0, process.output
    assert "SIGTERM: stopping" in process.output
    assert FakeLauncher(default_state_dir()).status(clone.id).state is LaunchState.RUNNING
    sc_node.send(clone.id, "while no serve runs")
    with serving(sc_node):
        sc_node.send(clone.id, "bye")
        record = wait_state(sc_home, clone.id, State.DONE)
    assert progress_texts(sc_home, clone.id, ProgressKind.MESSAGE) == ["while no serve runs", "bye"]
    assert sc_ready.starts() == [clone.id]
    assert record.exit_code == 0


def test_a_clone_its_launcher_lost_is_recorded_failed_as_vanished(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", HANG)
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.RUNNING)
    FakeLauncher(default_state_dir()).remove(clone.id)  # behind serve's back
    with serving(sc_node):
        record = wait_state(sc_home, clone.id, State.FAILED)
    assert record.reason.startswith("vanished")
    assert not (sc_home.active_dir / clone.id).exists()


def test_a_launch_cut_short_by_a_crash_happens_once(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.default = HANG
    sc_ready.save()
    moment = datetime.now(UTC)
    # Crashed after writing "launching" and before the launcher had it: launched now.
    lost = sc_node.start("acme/app#1")
    RunFolder(sc_home.clones_dir / lost.id).write_record(
        Record(lost.id, State.QUEUED, launching_at=moment)
    )
    # Crashed after the launcher had it and before the record said so: followed, not doubled.
    made = sc_node.start("acme/app#2")
    RunFolder(sc_home.clones_dir / made.id).write_record(
        Record(made.id, State.QUEUED, launching_at=moment)
    )
    launcher = FakeLauncher(default_state_dir())
    launcher.launch(
        LaunchSpec(made.id, sc_home.clones_dir / made.id, sc_home.secrets_file, "unused")
    )
    with serving(sc_node):
        wait_state(sc_home, lost.id, State.RUNNING)
        record = wait_state(sc_home, made.id, State.RUNNING)
        assert record.started_at == moment
        sc_node.stop(lost.id)
        sc_node.stop(made.id)
        wait_state(sc_home, lost.id, State.STOPPED)
        wait_state(sc_home, made.id, State.STOPPED)
    assert sorted(sc_ready.starts()) == sorted([lost.id, made.id])


def test_a_malformed_request_fails_that_clone_and_serve_goes_on(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.default = Script(play=Play.FINISH)
    sc_ready.save()
    good = sc_node.start("acme/app#1")
    bad = queue(sc_home, 2)
    (sc_home.clones_dir / bad / "request.json").write_text("{not json", encoding="utf-8")
    with serving(sc_node):
        record = wait_state(sc_home, bad, State.FAILED)
        wait_state(sc_home, good.id, State.DONE)
    assert str(sc_home.clones_dir / bad / "request.json") in record.reason
    assert not (sc_home.active_dir / bad).exists()
    assert sc_ready.starts() == [good.id]


def test_a_malformed_progress_line_is_skipped_not_fatal(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", ECHO)
    clone = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / clone.id)
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.RUNNING)
        files.append_line(folder.progress_file, b'{"step": "nowhere"}')
        files.append_line(folder.inbox_file, b"garbage")
        sc_node.send(clone.id, "bye")
        record = wait_state(sc_home, clone.id, State.DONE)
    assert record.report == "all done"


def test_serve_logs_to_the_clones_folder(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.FINISH))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.DONE)
    text = sc_home.serve_log.read_text(encoding="utf-8")
    assert f"clone {clone.id} ended done" in text


def test_the_fake_launcher_says_plainly_when_the_run_program_is_missing(
    sc_home: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shadowclone_fake_launch.launcher as fake

    monkeypatch.delenv("SHADOWCLONE_FAKE_SCRIPTS", raising=False)
    monkeypatch.setattr(fake, "run_program_available", lambda: False)
    set_up(sc_home)
    clone = local_node(sc_home).start("acme/app#1")
    launcher = FakeLauncher(tmp_path / "state")
    with pytest.raises(PluginUnavailable, match="no run program yet"):
        launcher.check()
    with pytest.raises(PluginUnavailable, match="not part of this installation"):
        launcher.launch(
            LaunchSpec(clone.id, sc_home.clones_dir / clone.id, sc_home.secrets_file, "unused")
        )
    assert launcher.running() == []


def test_the_daily_cost_cap_holds_queued_clones_and_says_why(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    """Once the clones of the last 24 hours have cost `daily_cost_usd`, queued clones wait
    (get says why), and start as soon as the cap allows."""
    sc_ready.default = Script(play=Play.FINISH, steps=1)
    sc_ready.save()
    first = sc_node.start("acme/app#1")
    with serving(sc_node):
        wait_state(sc_home, first.id, State.DONE)
    folder = RunFolder(sc_home.clones_dir / first.id)
    record = folder.record()
    assert record is not None
    folder.write_record(attrs.evolve(record, usage=Usage(100, 10, 2.5)))
    capped = LocalNode(
        attrs.evolve(
            sc_node.config, limits=attrs.evolve(sc_node.config.limits, daily_cost_usd=2.0)
        ),
        sc_node.paths,
    )
    second = capped.start("acme/app#2")
    with serving(capped):
        view = wait_until(
            lambda: (v := capped.get(second.id)).waiting_for.startswith("the daily") and v,
            "the clone to wait for the daily cost cap",
        )
        assert "$2.50 spent" in view.waiting_for and "daily_cost_usd = 2" in view.waiting_for
        time.sleep(1.0)  # several passes of serve's queue
        assert state_of(sc_home, second.id) is State.QUEUED
    raised = LocalNode(
        attrs.evolve(
            sc_node.config, limits=attrs.evolve(sc_node.config.limits, daily_cost_usd=3.0)
        ),
        sc_node.paths,
    )
    with serving(raised):
        wait_state(sc_home, second.id, State.DONE)
    assert sc_ready.starts() == [first.id, second.id]


def test_a_scheduled_clone_holds_its_logins_queue_until_the_reset(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    """A clone whose login's usage limit is reached shows as scheduled (with its time) and
    holds the queued clones of that login, not the others'; when its wait ends it is running
    again and they start."""
    sc_ready.default = HANG
    sc_ready.save()
    sc_node = with_parallel(sc_node, 3)
    limited = queue(sc_home, 1, login="claude-subscription")
    with serving(sc_node):
        wait_state(sc_home, limited, State.RUNNING)
        until = datetime.now(UTC) + timedelta(hours=1)
        folder = RunFolder(sc_home.clones_dir / limited)
        said = "the claude-subscription login's usage limit is reached"
        scheduled = ProgressLine(Step.ENGINE, ProgressKind.SCHEDULED, said, until=until)
        folder.append_progress(scheduled)
        record = wait_state(sc_home, limited, State.SCHEDULED)
        assert record.scheduled_until == until
        same, other = queue(sc_home, 2, login="claude-subscription"), queue(sc_home, 3)
        wait_state(sc_home, other, State.RUNNING)
        reason = sc_node.get(same).waiting_for
        assert reason.startswith("its login claude-subscription, whose usage limit resets")
        assert state_of(sc_home, same) is State.QUEUED
        assert "scheduled until" in describe(sc_node.get(limited))
        with pytest.raises(Refused, match="not scheduled"):
            sc_node.resume(other)
    # A serve started again reads the clone's lines afresh: still scheduled, same time, and
    # the login's queued clone still waits.
    with serving(sc_node):
        time.sleep(1.0)
        again = record_of(sc_home, limited)
        assert again is not None
        assert (again.state, again.scheduled_until) == (State.SCHEDULED, until)
        assert state_of(sc_home, same) is State.QUEUED
        assert sc_node.resume(limited).id == limited
        over = ProgressLine(Step.ENGINE, ProgressKind.SCHEDULED, "the limit has reset")
        folder.append_progress(over)
        wait_state(sc_home, limited, State.RUNNING)
        wait_state(sc_home, same, State.RUNNING)
        for clone_id in (limited, same, other):
            sc_node.stop(clone_id)
        for clone_id in (limited, same, other):
            wait_state(sc_home, clone_id, State.STOPPED)


def test_an_overloaded_login_runs_fewer_clones_then_as_many_again(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts
) -> None:
    """A clone says its provider is overloaded: serve halves how many clones of that login
    may run (other logins go on), and grows it back by one per quiet spell."""
    sc_ready.default = HANG
    sc_ready.save()
    sc_node = with_parallel(sc_node, 5)
    first, second = queue(sc_home, 1), queue(sc_home, 2)
    settings = attrs.evolve(FAST, overload_restore_s=1.5)
    with serving(sc_node, settings):
        wait_state(sc_home, first, State.RUNNING)
        wait_state(sc_home, second, State.RUNNING)
        said = "the model provider answered 529: the request is sent again soon"
        RunFolder(sc_home.clones_dir / first).append_progress(
            ProgressLine(Step.ENGINE, ProgressKind.OVERLOADED, said)
        )
        time.sleep(0.5)  # serve reads the line
        third, fourth = queue(sc_home, 3), queue(sc_home, 4)
        other = queue(sc_home, 5, login="another-login")
        wait_state(sc_home, other, State.RUNNING)
        assert state_of(sc_home, third) is State.QUEUED  # two run; one may, for now
        assert state_of(sc_home, fourth) is State.QUEUED
        login = RunFolder(sc_home.clones_dir / first).request().login
        assert sc_node.throttles() == {login: 1}
        reason = sc_node.get(third).waiting_for
        assert reason == (
            f"its login {login}, whose provider is overloaded: serve runs at most 1 of its "
            "clones for now (2 running)"
        ), reason
        assert "overloaded" in describe(sc_node.get(third))
        wait_state(sc_home, third, State.RUNNING)  # grown back to three of the login's
        wait_state(sc_home, fourth, State.RUNNING)  # and four
        deadline = time.monotonic() + 30
        while sc_node.throttles() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sc_node.throttles() == {}, "the login is held back no more"
        for clone_id in (first, second, third, fourth, other):
            sc_node.stop(clone_id)
        for clone_id in (first, second, third, fourth, other):
            wait_state(sc_home, clone_id, State.STOPPED)
