"""A stop always wins over a launch, and admission's one-clone rule holds across it: a
hypothesis state machine runs `start` and `stop` at every point of serve's launch (before it
takes the clone's stop lock, between its mark `launching_at` and the launcher, inside the
launcher's call, after it), and a race of real CLI processes against a real serve does the
same by timing. What other processes do while serve holds the stop lock runs on threads of
their own, as it would in those processes: a stop then waits for the launch to finish."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from shadowclone.errors import Refused
from shadowclone.node.runfolder import RunFolder, run_folders
from shadowclone.node.schemas import Record, State
from shadowclone.plugin import CloneStatus, LaunchSpec, LaunchState
from shadowclone.plugin.node import local_node
from shadowclone.serve.loop import Server, ServeSettings
from shadowclone_fake_launch.scripts import (
    SCRIPTS_VARIABLE,
    Play,
    Script,
    ScriptsFile,
    write_scripts,
)
from shadowclone_testing.serving import ServeProcess, make_serve_home, starts, wait_until

SPELLINGS = ("acme/app", "Acme/App", "ACME/APP")
NUMBERS = st.integers(min_value=1, max_value=2)
SETTINGS = ServeSettings(stop_grace_s=60.0, kill_grace_s=0.0, status_poll_s=0.0, rescan_s=0.0)
"""Every step reads every clone and asks the launcher; a stopped clone is not given time."""


@attrs.frozen
class Start:
    number: int
    spelling: str


@attrs.frozen
class Stop:
    pick: int
    """Which of the clones started so far (modulo their number)."""


Op = Start | Stop
OPS = st.lists(
    st.one_of(
        st.builds(Start, NUMBERS, st.sampled_from(SPELLINGS)),
        st.builds(Stop, st.integers(min_value=0, max_value=7)),
    ),
    max_size=3,
)


class MemoryLauncher:
    """A launcher that runs nothing: clones are states in a dict. `during` runs inside
    `launch`, as another process would act while a real launcher starts a container."""

    def __init__(self) -> None:
        self.states: dict[str, CloneStatus] = {}
        self.launched: list[str] = []
        self.during: list[Op] = []
        self.act: object = None
        self.lock = threading.Lock()

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
        meanwhile(self.act, self.during)
        with self.lock:
            self.launched.append(spec.clone_id)
            self.states[spec.clone_id] = CloneStatus(spec.clone_id, LaunchState.RUNNING)

    def status(self, clone_id: str) -> CloneStatus:
        with self.lock:
            return self.states.get(clone_id, CloneStatus(clone_id, LaunchState.MISSING))

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        self.exit(clone_id, 143)

    def exit(self, clone_id: str, code: int) -> None:
        with self.lock:
            if self.states.get(clone_id, CloneStatus(clone_id, LaunchState.MISSING)).state is (
                LaunchState.RUNNING
            ):
                self.states[clone_id] = CloneStatus(clone_id, LaunchState.EXITED, code)

    def remove(self, clone_id: str) -> None:
        with self.lock:
            self.states.pop(clone_id, None)

    def running(self) -> Sequence[CloneStatus]:
        with self.lock:
            return list(self.states.values())

    def alive(self, clone_id: str) -> bool:
        return self.status(clone_id).state is LaunchState.RUNNING


def run_ops(machine: object, ops: list[Op]) -> None:
    """Run and consume `ops` on `machine` (a LaunchRace), as another process would."""
    pending = list(ops)
    ops.clear()
    for op in pending:
        with machine.acting:  # type: ignore[attr-defined]
            if isinstance(op, Start):
                machine.start(op.number, op.spelling)  # type: ignore[attr-defined]
            else:
                machine.stop_one(op.pick)  # type: ignore[attr-defined]


def meanwhile(machine: object, ops: list[Op]) -> None:
    """Run `ops` on a thread of their own, as another process would while serve holds a
    clone's stop lock (a stop among them waits for it); the machine joins them."""
    pending = list(ops)
    ops.clear()
    if not pending:
        return

    def run() -> None:
        try:
            run_ops(machine, pending)
        except BaseException as error:  # noqa: BLE001 - raised again by the machine
            machine.errors.append(error)  # type: ignore[attr-defined]

    thread = threading.Thread(target=run, daemon=True)
    machine.threads.append(thread)  # type: ignore[attr-defined]
    thread.start()


class HookedServer(Server):
    """serve, with other processes acting just before it launches a clone (before it takes
    the clone's stop lock) and just after it marks the clone as launching (its record's
    `launching_at`, under the lock)."""

    before_mark: list[Op]
    after_mark: list[Op]
    act: object

    def launch(self, clone: object) -> None:
        run_ops(self.act, self.before_mark)
        super().launch(clone)  # type: ignore[arg-type]

    def write(self, clone: object, record: Record, launch_failed: bool = False) -> None:
        marking = record.launching_at is not None and clone.record.launching_at is None  # type: ignore[attr-defined]
        super().write(clone, record, launch_failed)  # type: ignore[arg-type]
        if marking:
            meanwhile(self.act, self.after_mark)


class LaunchRace(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.temp = tempfile.TemporaryDirectory()
        self.paths, _ = make_serve_home(Path(self.temp.name), parallel=2)
        self.node = local_node(self.paths)
        self.launcher = MemoryLauncher()
        self.launcher.act = self
        self.server = HookedServer(self.node.config, self.paths, self.launcher, SETTINGS)
        self.server.before_mark, self.server.after_mark, self.server.act = [], [], self
        self.ids: list[str] = []
        self.reported_stopped: set[str] = set()
        """Clones `stop` said were stopped (in the queue): none of them may ever launch."""
        self.stopped_in_launch: set[str] = set()
        """Clones stopped while serve was launching them: serve stops them at once."""
        self.threads: list[threading.Thread] = []
        """Other processes' acts while serve held a stop lock, joined after each step."""
        self.errors: list[BaseException] = []
        self.acting = threading.RLock()
        """One act at a time, each with what it checks: an act on a thread is as atomic as
        one on the machine's own."""

    def teardown(self) -> None:
        self.server.feed.stopping.set()
        self.temp.cleanup()

    # ------------------------------------------------------------------ what others do

    def start(self, number: int, spelling: str) -> None:
        target = f"{spelling}#{number}"
        others = [i for i in self.ids if self.folder(i).request().target.number == number]
        try:
            view = self.node.start(target)
        except Refused as refused:
            if "already has an active clone" in str(refused):
                assert any(self.holds(i) for i in others), f"{target} refused, no clone holds it"
            return
        assert not any(self.launcher.alive(i) for i in others), f"{target}: a second clone"
        self.ids.append(view.id)

    def stop_one(self, pick: int) -> None:
        if not self.ids:
            return
        clone_id = self.ids[pick % len(self.ids)]
        try:
            view = self.node.stop(clone_id)
        except Refused:
            return
        if view.state is State.STOPPED:
            assert not self.launcher.alive(clone_id), f"{clone_id} reported stopped, runs"
            self.reported_stopped.add(clone_id)
        elif view.state is State.QUEUED:  # serve is launching it: the stop must still win
            self.stopped_in_launch.add(clone_id)

    def folder(self, clone_id: str) -> RunFolder:
        return RunFolder(self.paths.clones_dir / clone_id)

    def holds(self, clone_id: str) -> bool:
        """Whether a clone keeps its issue: active as the node sees it, or running."""
        return self.node.get(clone_id).state.active or self.launcher.alive(clone_id)

    # ------------------------------------------------------------------ rules

    @rule(number=NUMBERS, spelling=st.sampled_from(SPELLINGS))
    def owner_starts(self, number: int, spelling: str) -> None:
        self.start(number, spelling)

    @precondition(lambda self: self.ids)
    @rule(pick=st.integers(min_value=0, max_value=7))
    def owner_stops(self, pick: int) -> None:
        self.stop_one(pick)

    @rule(before=OPS, after=OPS, during=OPS)
    def serve_steps(self, before: list[Op], after: list[Op], during: list[Op]) -> None:
        self.server.before_mark[:] = before
        self.server.after_mark[:] = after
        self.launcher.during[:] = during
        self.server.step(set())
        self.settle()
        self.server.step(set())  # what the first step's hooks did, settled
        self.settle()
        for clone_id in self.stopped_in_launch:
            clone = self.server.clones.get(clone_id)
            if clone is not None and clone.stopping is not None:
                clone.stopping.join(5)
            assert not self.launcher.alive(clone_id), f"{clone_id} runs on after its stop"

    def settle(self) -> None:
        """Wait for the acts still under way on threads; raise what one of them raised."""
        while self.threads:
            thread = self.threads.pop()
            thread.join(30)
            assert not thread.is_alive(), "a stop or start waited on serve for 30 s"
        if self.errors:
            raise self.errors[0]

    @precondition(lambda self: any(self.launcher.alive(i) for i in self.ids))
    @rule(pick=st.integers(min_value=0, max_value=7), code=st.sampled_from([0, 1]))
    def a_clone_exits(self, pick: int, code: int) -> None:
        alive = [i for i in self.ids if self.launcher.alive(i)]
        self.launcher.exit(alive[pick % len(alive)], code)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def a_clone_reported_stopped_never_launches(self) -> None:
        assert not self.reported_stopped & set(self.launcher.launched)
        for clone_id in self.reported_stopped:
            record = self.folder(clone_id).record()
            assert record is None or record.state in (State.QUEUED, State.STOPPED), record
            assert record is None or record.started_at is None

    @invariant()
    def one_clone_holds_an_issue(self) -> None:
        holding: dict[str, list[str]] = {}
        for clone_id in self.ids:
            if self.holds(clone_id):
                target = self.folder(clone_id).request().target.folded
                holding.setdefault(target, []).append(clone_id)
        assert all(len(ids) == 1 for ids in holding.values()), holding


TestLaunchRace = LaunchRace.TestCase
TestLaunchRace.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real `shadowclone` command, a process of its own."""
    command = Path(sys.executable).with_name("shadowclone")
    return subprocess.run(
        [str(command), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_stop_wins_over_launch_when_cli_processes_race_a_real_serve(tmp_path: Path) -> None:
    """Owners start an issue, stop the clone at once and start the issue again, in many
    processes at the same time, while serve launches clones one at a time as short ones end
    (so launches and stops keep meeting): no clone reported stopped ever runs, and no two
    clones of one issue ever run at once."""
    home = tmp_path / "home"
    home.mkdir()
    paths, variables = make_serve_home(home, parallel=1)
    start_log = home / "starts.jsonl"
    write_scripts(
        Path(variables[SCRIPTS_VARIABLE]),
        ScriptsFile(
            default=Script(play=Play.FINISH, steps=2, delay_s=0.6), start_log=str(start_log)
        ),
    )
    env = {**os.environ, **variables}
    serve = ServeProcess.start(paths, env=variables)
    serve.wait_serving()
    reported_stopped: set[str] = set()
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 240

    def enough() -> bool:
        """Both sides of the race seen often, or out of time (then the checks below say so)."""
        with lock:
            stops = len(reported_stopped)
        return (stops >= 5 and len(starts(start_log)) >= 10) or time.monotonic() > deadline

    def owner(number: int) -> None:
        spellings = itertools.cycle(SPELLINGS)
        for round_ in itertools.count():
            if round_ >= 20 and enough():
                return
            started = cli(env, "start", f"{next(spellings)}#{number}", "--json")
            if started.returncode != 0:
                if "already has an active clone" not in started.stderr:
                    with lock:
                        errors.append(started.stderr)
                continue
            clone_id = json.loads(started.stdout)["id"]
            stopped = cli(env, "stop", clone_id, "--json")
            if stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "stopped":
                with lock:
                    reported_stopped.add(clone_id)

    try:
        workers = [
            threading.Thread(target=owner, args=(number,))
            for number in (1, 1, 2, 2, 3, 3)  # two owners per issue
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(300)
        wait_until(lambda: not os.listdir(paths.active_dir), "every clone to end", 120)
    finally:
        assert serve.end() == 0, serve.output
    assert not errors, errors
    launched = set(starts(start_log))
    print(f"{len(reported_stopped)} stops won, {len(launched)} clones launched")
    assert len(reported_stopped) >= 5, "too few stops won: the race was not run"
    assert len(launched) >= 10, "too few clones launched: the race was not run"
    assert not reported_stopped & launched, "a clone reported stopped ran"
    spans: dict[str, list[tuple[datetime, datetime, str]]] = {}
    for folder in run_folders(paths.clones_dir):
        record = folder.record()
        assert record is not None and not record.state.active, record
        if record.started_at is not None:
            assert record.ended_at is not None
            key = folder.request().target.folded
            spans.setdefault(key, []).append((record.started_at, record.ended_at, folder.id))
    for key, held in spans.items():
        held.sort()
        for (_, ended, first), (started, _, second) in itertools.pairwise(held):
            assert ended <= started, f"{key}: {first} and {second} ran at once"
