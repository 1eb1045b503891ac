"""Spare run folders: a start takes one of its kind as its run folder, each spare is taken by
one start or given up by serve, never both, and nothing else sees them."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths, default_paths
from shadowclone.node import spares
from shadowclone.node.runfolder import RunFolder, run_folders
from shadowclone.node.spares import spare_kind
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone_testing.harness import make_home, set_up


def kind_of(node: LocalNode, target: str) -> str:
    """The kind of a clone `node` would start on `target`: that of a clone started there."""
    clone_id = node.start(target).id
    kind = spare_kind(RunFolder(node.paths.clones_dir / clone_id).request())
    node.stop(clone_id)
    assert kind is not None
    return kind


def test_a_start_takes_a_spare_of_its_kind_and_leaves_the_others(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home)
    set_up(sc_home, repo="acme/other")
    kind = kind_of(sc_node, "acme/app#1")
    assert kind_of(sc_node, "ACME/App#2") == kind, "GitHub ignores letter case"
    other = kind_of(sc_node, "acme/other#1")
    assert other != kind
    mine = spares.make_spare(sc_home.clones_dir, kind)
    theirs = spares.make_spare(sc_home.clones_dir, other)
    identity = os.stat(mine).st_ino

    view = sc_node.start("acme/app#3")

    folder = sc_home.clones_dir / view.id
    assert os.stat(folder).st_ino == identity, "the spare is the run folder"
    assert not mine.exists()
    assert RunFolder(folder).request().target.key == "acme/app#3"
    assert list(spares.waiting(sc_home.clones_dir)) == [theirs]
    assert sc_node.get(view.id).id == view.id
    assert next(v.id for v in sc_node.list(include_all=True).clones) == view.id
    assert all(not f.path.name.startswith(".") for f in run_folders(sc_home.clones_dir))
    # With no spare left of its kind, a start makes its folder as always.
    second = sc_node.start("acme/app#4")
    assert os.stat(sc_home.clones_dir / second.id).st_ino != identity
    assert list(spares.waiting(sc_home.clones_dir)) == [theirs]


def test_a_clone_whose_image_is_made_for_its_repository_takes_only_a_spare_of_its_own(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home)
    plain = kind_of(sc_node, "acme/app#1")
    set_up(sc_home, environment=".devcontainer/devcontainer.json")
    theirs = kind_of(sc_node, "acme/app#2")
    assert theirs is not None and theirs != plain
    spare = spares.make_spare(sc_home.clones_dir, theirs)
    identity = os.stat(spare).st_ino
    view = sc_node.start("acme/app#3")
    assert os.stat(sc_home.clones_dir / view.id).st_ino == identity


def test_a_spare_given_up_is_never_taken(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    kind = kind_of(sc_node, "acme/app#1")
    spare = spares.make_spare(sc_home.clones_dir, kind)
    hidden = spares.give_up(spare)
    assert hidden is not None and hidden.is_dir()
    assert spares.give_up(spare) is None
    view = sc_node.start("acme/app#2")
    assert os.stat(sc_home.clones_dir / view.id).st_ino != os.stat(hidden).st_ino
    assert list(spares.given_up(sc_home.clones_dir)) == [hidden]
    spares.forget(hidden)
    assert list(spares.given_up(sc_home.clones_dir)) == []


def _start(home: str, number: int, barrier: object, results: object) -> None:
    node = local_node(default_paths({"SHADOWCLONE_HOME": home}))
    node.registry  # noqa: B018 - load plugins before the race, not inside it
    barrier.wait()  # type: ignore[attr-defined]
    try:
        view = node.start(f"acme/app#{number}")
    except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
        results.put(("failed", repr(error), 0))  # type: ignore[attr-defined]
        return
    results.put(("started", view.id, os.stat(node.paths.clones_dir / view.id).st_ino))  # type: ignore[attr-defined]


def _give_up(clones: str, barrier: object, results: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    for spare in list(spares.waiting(Path(clones))):
        hidden = spares.give_up(spare)
        if hidden is not None:
            results.put(("given up", hidden.name, os.stat(hidden).st_ino))  # type: ignore[attr-defined]
    results.put(("giver done", "", 0))  # type: ignore[attr-defined]


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(starts=st.integers(2, 12), made=st.integers(0, 10))
def test_starts_racing_serve_giving_up_take_each_spare_once_or_not_at_all(
    tmp_path_factory: pytest.TempPathFactory, starts: int, made: int
) -> None:
    paths = make_home(tmp_path_factory.mktemp("home"), ("daily_clones", "1000"))
    set_up(paths)
    node = local_node(paths)
    kind = kind_of(node, "acme/app#1000")
    made_inodes = {os.stat(spares.make_spare(paths.clones_dir, kind)).st_ino for _ in range(made)}

    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(starts + 1)
    results = context.Queue()
    processes = [
        context.Process(
            target=_start, args=(str(paths.config_file.parent), n + 1, barrier, results)
        )
        for n in range(starts)
    ]
    processes.append(
        context.Process(target=_give_up, args=(str(paths.clones_dir), barrier, results))
    )
    for process in processes:
        process.start()
    outcomes: list[tuple[str, str, int]] = []
    while sum(what in ("started", "failed") for what, _, _ in outcomes) < starts or not any(
        what == "giver done" for what, _, _ in outcomes
    ):
        outcomes.append(results.get(timeout=120))
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    assert [o for o in outcomes if o[0] == "failed"] == []
    started = [inode for what, _, inode in outcomes if what == "started"]
    given = [inode for what, _, inode in outcomes if what == "given up"]
    assert len(started) == starts and len(set(started)) == starts, "one folder per start"
    taken = set(started) & made_inodes
    assert not taken & set(given), "a spare both taken and given up"
    assert taken | set(given) == made_inodes, "a spare lost"
    assert list(spares.waiting(paths.clones_dir)) == []
    for what, clone_id, _ in outcomes:
        if what == "started":
            assert RunFolder(paths.clones_dir / clone_id).request().id == clone_id


def test_only_serves_spare_folders_are_taken(sc_node: LocalNode, sc_home: Paths) -> None:
    """A link, a file, a hidden or oddly named entry in the spares folder is never a run
    folder: the start makes its own."""
    set_up(sc_home)
    kind = kind_of(sc_node, "acme/app#1")
    place = spares.spares_dir(sc_home.clones_dir)
    place.mkdir()
    elsewhere = sc_home.clones_dir.parent / "elsewhere"
    elsewhere.mkdir()
    (place / f"{kind}.00000001").symlink_to(elsewhere)
    (place / f"{kind}.00000002").write_text("a file")
    (place / f".{kind}.00000003").mkdir()
    (place / f"{kind}.not-hex").mkdir()
    (place / f"{kind}").mkdir()
    assert list(spares.waiting(sc_home.clones_dir)) == []
    view = sc_node.start("acme/app#2")
    folder = sc_home.clones_dir / view.id
    assert folder.is_dir() and not folder.is_symlink()
    assert list(elsewhere.iterdir()) == []


def test_a_spare_never_replaces_a_folder_that_is_not_empty(sc_home: Paths) -> None:
    kind = "0" * 16
    spare = spares.make_spare(sc_home.clones_dir, kind)
    destination = sc_home.clones_dir / "261204-000000-abcd"
    destination.mkdir()
    (destination / "request.json").write_text("{}")
    assert not spares.take_spare(sc_home.clones_dir, kind, destination)
    assert (destination / "request.json").read_text() == "{}"
    assert list(spares.waiting(sc_home.clones_dir)) == [spare]
    empty = sc_home.clones_dir / "261204-000000-efgh"
    empty.mkdir()
    assert spares.take_spare(sc_home.clones_dir, kind, empty)
    assert list(spares.waiting(sc_home.clones_dir)) == []
