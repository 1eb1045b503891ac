"""The rules of serve under any sequence of starts, messages, stops, clone endings and serve
restarts: a hypothesis state machine drives a real serve (on a thread) and real fake clones,
and checks the rules after every step."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from shadowclone.errors import Refused
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, Record, State
from shadowclone.plugin import LaunchState
from shadowclone.plugin.node import local_node
from shadowclone_fake_launch.launcher import FakeLauncher
from shadowclone_testing.serving import (
    ServeThread,
    make_serve_home,
    remove_all,
    starts,
    wait_state,
    wait_until,
)

PARALLEL = 2
MOST_CLONES = 5
ENDED = (State.DONE, State.FAILED, State.STOPPED)


class ServeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.temp = tempfile.TemporaryDirectory()
        self.root = Path(self.temp.name)
        self.paths, _ = make_serve_home(self.root, PARALLEL)
        self.launcher = FakeLauncher(self.root / "fake-launch", self.root / "scripts.json")
        self.node = local_node(self.paths)
        self.serve = ServeThread(self.node, launcher=self.launcher)
        self.serve.start()
        self.ids: list[str] = []
        self.ended: dict[str, Record] = {}
        self.sent = 0

    # ------------------------------------------------------------------ helpers

    def folder(self, clone_id: str) -> RunFolder:
        return RunFolder(self.paths.clones_dir / clone_id)

    def record(self, clone_id: str) -> Record | None:
        return self.folder(clone_id).record()

    def in_state(self, *states: State) -> list[str]:
        found = []
        for clone_id in self.ids:
            record = self.record(clone_id)
            if record is not None and record.state in states:
                found.append(clone_id)
        return found

    def echoed(self, clone_id: str) -> list[str]:
        lines, _, _ = self.folder(clone_id).progress()
        return [line.text for line in lines if line.kind is ProgressKind.MESSAGE]

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self.ids) < MOST_CLONES)
    @rule()
    def start(self) -> None:
        clone_id = self.node.start(f"acme/app#{len(self.ids) + 1}").id
        self.ids.append(clone_id)

        def taken_up() -> bool:
            record = self.record(clone_id)
            if record is None:
                return False
            full = len(self.in_state(State.RUNNING, State.WAITING)) >= PARALLEL
            return record.state is not State.QUEUED or full

        wait_until(taken_up, f"serve to run or queue {clone_id}")

    @precondition(lambda self: self.ids)
    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        clone_id = data.draw(st.sampled_from(self.ids))
        text = f"message {self.sent}"
        self.sent += 1
        try:
            self.node.send(clone_id, text)
        except Refused:
            view = self.node.get(clone_id)
            assert not view.state.active or view.stop_requested
            return
        record = self.record(clone_id)
        if record is not None and record.state in (State.RUNNING, State.WAITING):
            wait_until(lambda: text in self.echoed(clone_id), f"{text} to reach {clone_id}")

    @precondition(lambda self: self.ids)
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        clone_id = data.draw(st.sampled_from(self.ids))
        view = self.node.get(clone_id)
        if not view.state.active:
            try:
                self.node.stop(clone_id)
            except Refused:
                return
            raise AssertionError(f"stop of {view.state} clone {clone_id} was not refused")
        self.node.stop(clone_id)
        record = wait_state(self.paths, clone_id, *ENDED)
        assert record.state is State.STOPPED, record
        if record.started_at is None:
            assert clone_id not in starts(self.root / "starts.jsonl")

    @precondition(lambda self: self.in_state(State.RUNNING))
    @rule(data=st.data(), crash=st.booleans())
    def end_a_running_clone(self, data: st.DataObject, crash: bool) -> None:
        """The clone finishes (`bye`), or falls over with no final line (`crash`)."""
        clone_id = data.draw(st.sampled_from(self.in_state(State.RUNNING)))
        try:
            self.node.send(clone_id, "crash" if crash else "bye")
        except Refused:
            return  # it was stopped meanwhile
        record = wait_state(self.paths, clone_id, *ENDED)
        if crash:
            assert (record.state, record.exit_code) == (State.FAILED, 3)
            assert "the clone fell over" in record.output_tail
        else:
            assert (record.state, record.exit_code) == (State.DONE, 0)

    @rule(messages=st.integers(min_value=0, max_value=2))
    def restart_serve(self, messages: int) -> None:
        self.serve.stop()
        for clone_id in self.ids[:messages]:
            try:
                self.node.send(clone_id, f"while down {self.sent}")
                self.sent += 1
            except Refused:
                continue
        self.serve = ServeThread(self.node, launcher=self.launcher)
        self.serve.start()

    @rule()
    def let_serve_work(self) -> None:
        time.sleep(0.3)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def serve_is_healthy(self) -> None:
        self.serve.raise_errors()

    @invariant()
    def records_are_whole_and_an_ending_is_final(self) -> None:
        for clone_id in self.ids:
            record = self.record(clone_id)  # parses, or this raises
            if record is None:
                continue
            assert record.id == clone_id
            if clone_id in self.ended:
                assert record == self.ended[clone_id], "an ended clone's record changed"
            elif record.state in ENDED:
                self.ended[clone_id] = record

    @invariant()
    def at_most_parallel_clones_run(self) -> None:
        assert len(self.in_state(State.RUNNING, State.WAITING)) <= PARALLEL
        running = [s for s in self.launcher.running() if s.state is LaunchState.RUNNING]
        assert len(running) <= PARALLEL

    @invariant()
    def clones_start_once_and_in_request_order(self) -> None:
        started = starts(self.root / "starts.jsonl")
        assert len(started) == len(set(started)), "a clone ran twice"
        assert started == sorted(started, key=self.ids.index)
        for clone_id in self.ids:
            record = self.record(clone_id)
            if record is not None and record.state is State.STOPPED and not record.started_at:
                assert clone_id not in started, "a clone stopped in the queue started"

    @invariant()
    def each_inbox_line_is_delivered_at_most_once_in_order(self) -> None:
        for clone_id in self.ids:
            folder = self.folder(clone_id)
            inbox, _, _ = folder.inbox()
            delivered, _, _ = folder.deliveries()
            ids = [line.id for line in delivered]
            assert ids == [line.id for line in inbox][: len(ids)]
            echoed = self.echoed(clone_id)
            assert echoed == [line.text for line in delivered][: len(echoed)]

    # ------------------------------------------------------------------ the end

    def teardown(self) -> None:
        try:
            for clone_id in self.ids:
                try:
                    self.node.send(clone_id, "bye")
                except Refused:
                    continue
            for clone_id in self.ids:
                wait_state(self.paths, clone_id, *ENDED)
            wait_until(lambda: not any(self.paths.active_dir.iterdir()), "active markers to go")
            wait_until(lambda: self.launcher.running() == [], "the launcher to be empty")
            for clone_id in self.ids:
                record = self.record(clone_id)
                assert record is not None
                if record.state is State.DONE:  # it waited for `bye`: everything reached it
                    inbox, _, _ = self.folder(clone_id).inbox()
                    assert self.echoed(clone_id) == [line.text for line in inbox]
        finally:
            self.serve.stop()
            remove_all(self.launcher)
            self.temp.cleanup()


ServeMachine.TestCase.settings = settings(
    max_examples=5,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestServeMachine = ServeMachine.TestCase
