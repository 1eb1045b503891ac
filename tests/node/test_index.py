"""The clones' index: whatever the clock does between starts, prefix lookups, the daily count
and the newest-first listing give what a scan of the run folders would give."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.config import HOME_VARIABLE, default_paths, init_config, set_value
from shadowclone.node.ids import id_time, new_clone_id
from shadowclone.node.index import RECORD, CloneIndex
from shadowclone.node.local import CloneView
from shadowclone.node.runfolder import run_folders
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone_testing.harness import set_up

EPOCH = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def make_node(
    root: Path, clock: Callable[[], datetime] | None = None, daily_clones: int = 1000
) -> LocalNode:
    paths = default_paths({HOME_VARIABLE: str(root / "home")})
    init_config(paths)
    for key, value in (("providers.scripted.login", '"no-login"'), ("engine", '"scripted"')):
        set_value(paths, key, value)
    set_up(paths)
    base = local_node(paths)
    config = attrs.evolve(base.config, daily_clones=daily_clones)
    return LocalNode(config, paths, clock=clock or (lambda: EPOCH))


# Clock moves between starts: often the same second, sometimes back (an NTP step), forward.
moves = st.lists(
    st.one_of(
        st.just(0),
        st.integers(min_value=1, max_value=5),
        st.integers(min_value=-3600, max_value=-1),
        st.integers(min_value=1, max_value=3 * 86400),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(steps=moves, cut=st.integers(min_value=0, max_value=24))
def test_the_index_answers_as_a_scan_of_the_folders_would(steps: list[int], cut: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        now = [EPOCH]

        def clock() -> datetime:
            return now[0]

        node = make_node(Path(tmp), clock=clock, daily_clones=10_000)
        for number, step in enumerate(steps, 1):
            now[0] += timedelta(seconds=step)
            node.start(f"acme/app#{number}")
        index = CloneIndex(node.paths.clones_dir)
        ids = list(reversed(list(index.newest())))
        on_disk = {folder.id for folder in run_folders(node.paths.clones_dir)}
        assert set(ids) == on_disk and len(ids) == len(steps)
        times = [time for time in map(id_time, ids) if time is not None]
        assert len(times) == len(ids) and times == sorted(times), "an id's time never goes back"

        for clone_id in ids:
            for length in (1, 6, 8, 13, 15, len(clone_id)):
                prefix = clone_id[:length]
                assert index.with_prefix(prefix) == [i for i in ids if i.startswith(prefix)]
        moment = times[min(cut, len(times) - 1)]
        for shift in (-1, 0, 1):
            since = moment + timedelta(seconds=shift)
            expected = sum(1 for t in times if t >= since)
            assert index.since(since) == expected


def test_a_torn_record_is_cut_off_by_the_next_start(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    first = node.start("acme/app#1").id
    index = CloneIndex(node.paths.clones_dir)
    with open(index.path, "ab") as handle:
        handle.write(b"261201-1200")  # a start that died mid-write
    second = node.start("acme/app#2").id
    assert os.path.getsize(index.path) == 2 * RECORD
    assert list(index.newest()) == [second, first]


def test_run_folders_of_an_earlier_version_are_indexed_by_the_next_start(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    old = [new_clone_id(EPOCH - timedelta(days=days)) for days in (3, 2, 1)]
    for clone_id in old:
        (node.paths.clones_dir / clone_id).mkdir(parents=True)
    index = CloneIndex(node.paths.clones_dir)
    assert not index.path.exists()
    assert list(index.newest()) == sorted(old, reverse=True), "readers scan meanwhile"
    assert index.with_prefix(old[0][:8]) == [old[0]]
    new = node.start("acme/app#1").id
    assert list(index.newest()) == [new, *sorted(old, reverse=True)]


def test_a_listing_of_every_clone_streams_newest_first(tmp_path: Path) -> None:
    node = make_node(tmp_path, daily_clones=100)
    started = [node.start(f"acme/app#{number}").id for number in range(1, 8)]
    first = next(node.views(include_all=True))
    assert isinstance(first, CloneView) and first.id == started[-1]
    assert [v.id for v in node.list(include_all=True).clones] == started[::-1]
    assert [v.id for v in node.list(limit=3).clones][:3] == started[::-1][:3]
