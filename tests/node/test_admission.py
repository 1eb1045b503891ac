"""The admission rules hold under any sequence of operations, and under
concurrent starts from many threads and many processes."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from shadowclone.config import Paths, default_paths, init_config, set_value
from shadowclone.errors import Refused
from shadowclone.node.admission import DAY
from shadowclone.node.runfolder import RunFolder, run_folders
from shadowclone.node.schemas import Record, State
from shadowclone.plugin.node import local_node
from shadowclone_testing.harness import set_up

DAILY = 4
NUMBERS = st.integers(min_value=1, max_value=4)
SPELLINGS = st.sampled_from(["acme/app", "Acme/App", "ACME/APP", "acme/APP", "aCmE/aPp"])
"""One repository as owners may type it: GitHub ignores letter case, so admission must too."""


def make_home(root: Path, daily: int) -> Paths:
    paths = default_paths({"SHADOWCLONE_HOME": str(root)})
    init_config(paths)
    for key, value in (
        ("providers.scripted.login", '"no-login"'),
        ("engine", '"scripted"'),
        ("daily_clones", str(daily)),
    ):
        set_value(paths, key, value)
    set_up(paths)
    return paths


class Admission(RuleBasedStateMachine):
    """A model of the rules beside the real node; every start must agree with the model."""

    def __init__(self) -> None:
        super().__init__()
        self.now = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
        self.started: list[tuple[datetime, int, str]] = []  # (time, issue, id)
        self.ended: set[str] = set()

    @initialize(root=st.uuids())
    def make(self, root: object) -> None:
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.paths = make_home(Path(self.tmp.name) / str(root), DAILY)
        self.node = local_node(self.paths)
        self.node.clock = lambda: self.now
        assert self.node.registry is not None  # loaded once, before any thread uses it

    def teardown(self) -> None:
        if hasattr(self, "tmp"):
            self.tmp.cleanup()

    def active_numbers(self) -> set[int]:
        return {n for _, n, i in self.started if i not in self.ended}

    def in_window(self) -> int:
        # A clone started exactly 24 hours ago still counts: the node never counts one a
        # moment less than a day (the times here are whole seconds, as the ids' are).
        return sum(1 for at, _, _ in self.started if at >= self.now - DAY)

    def expect_admitted(self, number: int) -> bool:
        return number not in self.active_numbers() and self.in_window() < DAILY

    @rule(number=NUMBERS, spelling=SPELLINGS)
    def start(self, number: int, spelling: str) -> None:
        expected = self.expect_admitted(number)
        try:
            view = self.node.start(f"{spelling}#{number}")
        except Refused:
            assert not expected, f"#{number} refused but the rules allow it"
            return
        assert expected, f"#{number} admitted but the rules refuse it"
        assert view.target.key == f"acme/app#{number}"  # as the setup record spells it
        self.started.append((self.now, number, view.id))

    @rule(starts=st.lists(st.tuples(NUMBERS, SPELLINGS), min_size=2, max_size=6))
    def concurrent_starts(self, starts: list[tuple[int, str]]) -> None:
        numbers = [n for n, _ in starts]
        barrier = threading.Barrier(len(numbers))
        admitted: list[tuple[int, str]] = []

        def one(number: int, spelling: str) -> None:
            barrier.wait()
            with contextlib.suppress(Refused):
                admitted.append((number, self.node.start(f"{spelling}#{number}").id))

        threads = [threading.Thread(target=one, args=start) for start in starts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        room = DAILY - self.in_window()
        wanted = {n for n in numbers if n not in self.active_numbers()}
        assert len(admitted) == min(room, len(wanted))
        assert len({n for n, _ in admitted}) == len(admitted)
        # In issue order, not the threads' finishing order: what later rules draw from must
        # not depend on the race (hypothesis replays an example by its draws).
        self.started.extend((self.now, n, i) for n, i in sorted(admitted))

    @precondition(lambda self: any(i not in self.ended for _, _, i in self.started))
    @rule(data=st.data(), how=st.sampled_from(["stop", "done", "failed", "running"]))
    def act_on_a_clone(self, data: st.DataObject, how: str) -> None:
        live = [i for _, _, i in self.started if i not in self.ended]
        clone_id = data.draw(st.sampled_from(live))
        folder = RunFolder(self.paths.clones_dir / clone_id)
        if how == "stop":
            self.node.stop(clone_id)
            if self.node.get(clone_id).state is State.STOPPED:  # it was still queued
                self.ended.add(clone_id)
        elif how == "running":
            folder.write_record(Record(id=clone_id, state=State.RUNNING))
        else:
            folder.write_record(Record(id=clone_id, state=State(how)))
            self.ended.add(clone_id)

    @rule(seconds=st.integers(min_value=1, max_value=30 * 3600))
    def time_passes(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @invariant()
    def one_active_clone_per_issue(self) -> None:
        if not hasattr(self, "node"):
            return
        clones = self.node.list(include_all=True).clones
        active = [v.target.folded for v in clones if v.state.active]
        assert len(active) == len(set(active))

    @invariant()
    def no_day_holds_more_than_the_limit(self) -> None:
        times = sorted(at for at, _, _ in self.started)
        for index, at in enumerate(times):
            assert sum(1 for t in times[index:] if t - at < DAY) <= DAILY


TestAdmission = Admission.TestCase
TestAdmission.settings = settings(
    max_examples=30,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _start_in_a_process(home: str, target: str, barrier: object, results: object) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": home})
    node = local_node(paths)
    node.registry  # noqa: B018 - load plugins before the race, not inside it
    barrier.wait()  # type: ignore[attr-defined]
    try:
        node.start(target)
        results.put("admitted")  # type: ignore[attr-defined]
    except Refused as refused:
        results.put(f"refused: {refused}")  # type: ignore[attr-defined]


def _race(home: Paths, targets: list[str]) -> list[str]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(targets))
    results = context.Queue()
    processes = [
        context.Process(
            target=_start_in_a_process, args=(str(home.config_file.parent), t, barrier, results)
        )
        for t in targets
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return outcomes


@pytest.mark.slow
def test_32_processes_starting_one_issue_admit_exactly_one(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home", daily=100)
    outcomes = _race(paths, ["acme/app#1"] * 32)
    assert outcomes.count("admitted") == 1
    assert all("already has an active clone" in o for o in outcomes if o != "admitted")
    assert len(list(run_folders(paths.clones_dir))) == 1


@pytest.mark.slow
def test_32_processes_starting_one_issue_in_any_letter_case_admit_exactly_one(
    tmp_path: Path,
) -> None:
    paths = make_home(tmp_path / "home", daily=100)
    spellings = ["acme/app", "Acme/App", "ACME/APP", "acme/App"]
    outcomes = _race(paths, [f"{spellings[n % 4]}#1" for n in range(32)])
    assert outcomes.count("admitted") == 1
    assert all("already has an active clone" in o for o in outcomes if o != "admitted")
    (folder,) = run_folders(paths.clones_dir)
    assert folder.request().target.key == "acme/app#1"


def test_a_clone_shows_the_repository_as_github_spells_it(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home", daily=10)
    set_up(paths, repo="Acme/App")  # setup records GitHub's spelling
    node = local_node(paths)
    view = node.start("ACME/app#3")
    assert view.target.key == "Acme/App#3"
    assert [v.target.key for v in node.list().clones] == ["Acme/App#3"]
    with pytest.raises(Refused, match="already has an active clone"):
        node.start("acme/app#3")


@pytest.mark.slow
def test_32_processes_under_a_daily_limit_admit_exactly_the_limit(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home", daily=10)
    outcomes = _race(paths, [f"acme/app#{n}" for n in range(1, 33)])
    assert outcomes.count("admitted") == 10
    assert all("daily limit reached" in o for o in outcomes if o != "admitted")
    requests = [f.request() for f in run_folders(paths.clones_dir)]
    assert len(requests) == 10
    assert len({r.target.key for r in requests}) == 10
