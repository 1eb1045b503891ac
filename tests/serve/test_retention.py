"""`shadowclone rm` and `prune`: ended clones only, whole or not at all, links never followed,
safe beside serve and a second removal; durations as the owner writes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths, set_value
from shadowclone.config.durations import parse_duration
from shadowclone.errors import BadInput
from shadowclone.node.retention import TRASH_PREFIX
from shadowclone.node.runfolder import FolderRemoved, RunFolder
from shadowclone.node.schemas import Record, State
from shadowclone.plugin.node import local_node
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.serving import FAST, Scripts, ServeProcess, serving, wait_until

Cli = Callable[..., CliResult]
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
FIXTURES = [HealthCheck.function_scoped_fixture]


@given(st.lists(st.tuples(st.integers(0, 9999), st.sampled_from(sorted(UNITS))), min_size=1))
def test_a_duration_is_the_sum_of_its_parts(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{unit}" for n, unit in parts)
    seconds = sum(n * UNITS[u] for n, u in parts)
    if seconds > 100 * 366 * 86400:
        with pytest.raises(BadInput, match="expected at most 100 years"):
            parse_duration(text)
    else:
        assert parse_duration(text) == timedelta(seconds=seconds)


@given(
    st.text(max_size=12).filter(
        lambda t: not __import__("re").fullmatch(r"\s*(\d{1,9}[smhdwSMHDW])+\s*", t)
    )
)
def test_anything_else_is_one_clear_error(text: str) -> None:
    with pytest.raises(BadInput) as raised:
        parse_duration(text)
    assert "\n" not in str(raised.value) and "expected" in str(raised.value)


def ended(home: Paths, clone_id: str, days_ago: float = 0, state: State = State.DONE) -> None:
    """What serve leaves once a clone has ended: the ended record, and no active marker."""
    moment = datetime.now(UTC) - timedelta(days=days_ago)
    RunFolder(home.clones_dir / clone_id).write_record(
        Record(id=clone_id, state=state, ended_at=moment, updated_at=moment)
    )
    (home.active_dir / clone_id).unlink(missing_ok=True)


def start(cli: Cli, number: int) -> str:
    result = cli("start", f"acme/app#{number}", "--json")
    assert result.code == 0, result.err
    clone_id: str = json.loads(result.out)["id"]
    return clone_id


def test_rm_removes_an_ended_clone_and_its_workspace_never_following_links(
    sc_cli: Cli, sc_home: Paths, tmp_path: Path
) -> None:
    set_up(sc_home)
    clone_id, other = start(sc_cli, 1), start(sc_cli, 2)
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "file").write_text("precious")
    workspace = sc_home.clones_dir / clone_id / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "big").write_bytes(b"x" * 5000)
    (workspace / "to-a-folder").symlink_to(outside / "keep")
    (workspace / "src" / "to-a-file").symlink_to(outside / "keep" / "file")
    ended(sc_home, clone_id)

    removed = sc_cli("rm", clone_id)
    assert removed.code == 0, removed.err
    assert removed.out.startswith(f"removed {clone_id} (done, ")
    assert (outside / "keep" / "file").read_text() == "precious"
    assert not (sc_home.clones_dir / clone_id).exists()
    assert not [p for p in sc_home.clones_dir.iterdir() if p.name.startswith(TRASH_PREFIX)]
    assert sc_cli("get", clone_id).code == 2
    assert [row.split("\t")[0] for row in sc_cli("list").out.splitlines()] == [other]
    assert local_node(sc_home).index.since(datetime.now(UTC) - timedelta(hours=1)) == 2


def test_rm_refuses_an_active_clone_and_one_serve_has_not_finished(
    sc_cli: Cli, sc_home: Paths
) -> None:
    set_up(sc_home)
    clone_id = start(sc_cli, 1)
    refused = sc_cli("rm", clone_id)
    assert refused.code == 1
    assert refused.err == (
        f"shadowclone: clone {clone_id} is queued; only an ended clone is removed "
        f"(`shadowclone stop {clone_id}` first)\n"
    )
    RunFolder(sc_home.clones_dir / clone_id).write_record(Record(id=clone_id, state=State.DONE))
    pending = sc_cli("rm", clone_id)
    assert pending.code == 1 and "serve has not finished with it yet" in pending.err
    assert (sc_home.clones_dir / clone_id / "request.json").exists()


# Untimed: each example runs the CLI, which took 1.3 s on a busy machine.
@settings(max_examples=60, suppress_health_check=FIXTURES, deadline=None)
@given(odd=st.text(max_size=40) | st.sampled_from(["..", ".", "/", "../x", "*", "active", "-"]))
def test_rm_of_an_odd_id_removes_nothing(sc_cli: Cli, sc_home: Paths, odd: str) -> None:
    set_up(sc_home)
    listed = sc_cli("list", "--all", "--json")
    clone_id = json.loads(listed.out)[0]["id"] if json.loads(listed.out) else start(sc_cli, 1)
    ended(sc_home, clone_id)
    before = sorted(p.name for p in sc_home.clones_dir.parent.rglob("*"))
    if "\x00" in odd or odd.startswith("-"):
        return  # not an argument a shell can pass, or an option
    result = sc_cli("rm", odd)
    if result.code == 0:  # a unique prefix of the one clone
        assert clone_id.startswith(odd.strip())
        start(sc_cli, 1)  # another ended clone for the next example
        return
    assert result.code in (1, 2) and len(result.err.splitlines()) == 1, result.err
    assert sorted(p.name for p in sc_home.clones_dir.parent.rglob("*")) == before


@settings(max_examples=25, suppress_health_check=FIXTURES, deadline=None)
@given(
    ages=st.lists(st.floats(0, 90), min_size=1, max_size=6),
    threshold=st.integers(0, 90),
)
def test_prune_removes_exactly_the_clones_ended_longer_ago(
    sc_cli: Cli, sc_home: Paths, ages: list[float], threshold: int
) -> None:
    set_up(sc_home)
    set_value(sc_home, "daily_clones", "100000")
    for leftover in json.loads(sc_cli("list", "--all", "--json").out):
        ended(sc_home, leftover["id"], 1000)
    sc_cli("prune", "--older-than", "0s")
    ids = [start(sc_cli, n + 1) for n in range(len(ages))]
    active = start(sc_cli, len(ages) + 1)
    for clone_id, age in zip(ids, ages, strict=True):
        ended(sc_home, clone_id, age)
    result = sc_cli("prune", "--older-than", f"{threshold}d", "--json")
    assert result.code == 0, result.err
    gone = {item["id"] for item in json.loads(result.out)}
    expected = {c for c, age in zip(ids, ages, strict=True) if age > threshold + 1e-6}
    borderline = {c for c, age in zip(ids, ages, strict=True) if abs(age - threshold) < 1e-3}
    assert expected - borderline <= gone <= expected | borderline
    left = {row.split("\t")[0] for row in sc_cli("list", "--all").out.splitlines()}
    assert left == (set(ids) - gone) | {active}
    sc_cli("stop", active)
    ended(sc_home, active, 1000)


def test_prune_dry_run_and_bad_durations(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    clone_id = start(sc_cli, 1)
    ended(sc_home, clone_id, 40)
    dry = sc_cli("prune", "--older-than", "30d", "--dry-run")
    assert dry.out.splitlines()[-1].startswith("would remove 1 clone, ")
    assert (sc_home.clones_dir / clone_id).exists()
    bad = sc_cli("prune", "--older-than", "30 days")
    assert bad.code == 2
    assert bad.err == (
        "shadowclone: duration '30 days': expected a number and a unit (s, m, h, d or w), "
        "such as 30d, 12h or 1w2d\n"
    )
    assert sc_cli("prune", "--older-than", "30d").out.splitlines()[-1].startswith("removed 1 clone")


def test_two_removals_of_one_clone_one_wins(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    clone_id = start(sc_cli, 1)
    (sc_home.clones_dir / clone_id / "workspace").mkdir()
    for n in range(300):
        (sc_home.clones_dir / clone_id / "workspace" / f"f{n}").write_text("x")
    ended(sc_home, clone_id)
    program = "from shadowclone.cli import entry; entry()"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", program, "rm", clone_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(r.wait(60), *r.communicate()) for r in racers]
    assert sorted(code for code, _, _ in results) == [0, 2, 2, 2], results
    assert not (sc_home.clones_dir / clone_id).exists()


def test_a_removal_that_waited_for_the_lock_finds_the_clone_gone(
    sc_cli: Cli, sc_home: Paths
) -> None:
    """The interleaving the racers above hit now and then, made certain: a second removal
    (or a stop) opens the clone's stop lock, waits while the first renames the folder away,
    and then says plainly the clone is gone; none makes the folder again."""
    set_up(sc_home)
    clone_id = start(sc_cli, 1)
    ended(sc_home, clone_id)
    folder = RunFolder(sc_home.clones_dir / clone_id)
    node = local_node(sc_home)
    outcomes: dict[str, BaseException | None] = {}

    def second(name: str, act: Callable[[], object]) -> threading.Thread:
        def run() -> None:
            try:
                act()
                outcomes[name] = None
            except BaseException as error:  # noqa: BLE001 - kept for the assertion below
                outcomes[name] = error

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with folder.stop_lock(5):
        waiting = [
            second("rm", lambda: node.remove(clone_id)),
            second("stop", lambda: node.stop(clone_id)),
        ]
        time.sleep(0.3)  # both have opened the lock file and wait on it
        first = node.paths.clones_dir / f"{TRASH_PREFIX}{clone_id}-test"
        os.rename(folder.path, first)
    for thread in waiting:
        thread.join(30)
    for name in ("rm", "stop"):
        assert isinstance(outcomes[name], FolderRemoved), (name, outcomes[name])
        assert "\n" not in str(outcomes[name]) and clone_id in str(outcomes[name])
    assert not folder.path.exists()
    with pytest.raises(FolderRemoved), folder.stop_lock(1):
        pass  # a lock taken after the removal never makes the folder again
    assert not folder.path.exists()


def test_prune_beside_a_running_serve(sc_cli: Cli, sc_home: Paths, sc_scripts: Scripts) -> None:
    """Clones end while prune runs again and again: each goes once ended, serve never errs."""
    set_up(sc_home)
    set_value(sc_home, "parallel_clones", "2")
    sc_scripts.default = Script(play=Play.FINISH, steps=3)
    sc_scripts.save()
    ids = {start(sc_cli, n) for n in range(1, 7)}
    process = ServeProcess.start(sc_home)
    node = local_node(sc_home)
    try:
        process.wait_serving()

        def all_gone() -> bool:
            node.prune(timedelta(0))
            return not any((sc_home.clones_dir / c).exists() for c in ids)

        wait_until(all_gone, "every clone to end and be pruned")
    finally:
        code = process.end()
    assert code == 0, process.output
    log = sc_home.serve_log.read_text()
    assert " ERROR " not in log and "Traceback" not in log, log
    assert os.listdir(sc_home.active_dir) == []


def test_serve_applies_the_retention_config(sc_home: Paths, sc_ready: Scripts) -> None:
    set_value(sc_home, "retention.older_than", '"1d"')
    node = local_node(sc_home)
    old, recent = (node.start(f"acme/app#{n}").id for n in (1, 2))
    ended(sc_home, old, 2)
    ended(sc_home, recent, 0.5)
    with serving(node, attrs.evolve(FAST, retention_s=0.05)):
        wait_until(lambda: not (sc_home.clones_dir / old).exists(), "serve to remove the old clone")
    assert (sc_home.clones_dir / recent / "request.json").exists()
    assert "retention: removed clone " + old in sc_home.serve_log.read_text()


def test_a_bad_retention_is_refused_with_the_key(sc_cli: Cli, sc_home: Paths) -> None:
    result = sc_cli("config", "set", "retention.older_than", '"a month"')
    assert result.code != 0
    assert "retention.older_than: duration 'a month': expected a number and a unit" in result.err
