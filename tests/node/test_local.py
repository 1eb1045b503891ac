"""The node's operations and the admission rules, on a real clones folder."""

from __future__ import annotations

import os
import stat
import threading
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from shadowclone.config import Paths, set_value
from shadowclone.config.schema import ProviderConfig
from shadowclone.errors import BadInput, MalformedFile, NotFound, Refused, ShadowcloneError
from shadowclone.node import clones as clones_module
from shadowclone.node import views
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    INBOX_CLOSED,
    Answer,
    ChosenBy,
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    State,
    Step,
    now,
)
from shadowclone.node.views import CloneView
from shadowclone.plugin import Family
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone_testing.harness import set_up, skip_or_fail


def finish(node: LocalNode, clone_id: str, state: State = State.DONE) -> None:
    """What serve writes when a clone ends."""
    RunFolder(node.paths.clones_dir / clone_id).write_record(Record(id=clone_id, state=state))


def ask(node: LocalNode, clone_id: str, qid: str = "q1", free_text: bool = False) -> None:
    folder = RunFolder(node.paths.clones_dir / clone_id)
    folder.write_record(Record(id=clone_id, state=State.RUNNING))
    question = Question(qid, "Which database?", ("postgres", "sqlite"), "sqlite", free_text)
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.QUESTION, question=question))


def test_start_writes_a_request_that_list_and_get_show(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    view = sc_node.start("acme/app#7", instructions="keep it small")
    request = RunFolder(sc_home.clones_dir / view.id).request()
    assert request.target.key == "acme/app#7"
    assert (request.engine, request.login, request.launcher) == ("scripted", "no-login", "fake")
    assert request.instructions == "keep it small"
    assert view.state is State.QUEUED
    assert [v.id for v in sc_node.list().clones] == [view.id]
    assert sc_node.get(view.id).target.key == "acme/app#7"
    assert sc_node.get(view.id[:10]).id == view.id  # a unique prefix is enough


@pytest.mark.parametrize(
    ("text", "key", "kind"),
    [
        ("acme/app#7", "acme/app#7", None),
        ("https://github.com/acme/app/issues/7", "acme/app#7", "issue"),
        ("https://github.com/acme/app/pull/12", "acme/app#12", "pull"),
        ("https://GitHub.com/acme/app/pull/12/", "acme/app#12", "pull"),
    ],
)
def test_start_takes_short_names_and_urls(
    sc_node: LocalNode, sc_home: Paths, text: str, key: str, kind: str | None
) -> None:
    set_up(sc_home)
    view = sc_node.start(text)
    assert view.target.key == key
    assert view.target.kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "acme/app",
        "acme#1",
        "acme/app#0",
        "acme/app#x",
        "https://github.com/acme/app",
        "",
        "a b/c#1",
        "https://github.com/acme/app/issues/7#issuecomment-1",
        "ftp://github.com/acme/app/issues/7",
    ],
)
def test_start_refuses_anything_else_with_one_line(
    sc_node: LocalNode, sc_home: Paths, text: str
) -> None:
    set_up(sc_home)
    with pytest.raises(BadInput) as refused:
        sc_node.start(text)
    assert "expected owner/repo#N, or an issue or pull request URL" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        "https://gitlab.com/acme/app/issues/5",
        "http://evil.example/acme/app/pull/6",
        "https://github.com.evil.example/acme/app/issues/7",
        "https://evil.example.github.com/acme/app/issues/7",
        "https://user:pass@evil.example/acme/app/issues/7",
        "https://user:pass@github.com/acme/app/issues/7",
        "https://x@github.com/acme/app/issues/7",
        "https://github.com:8443/acme/app/issues/7",
        "https://ghe.example.com/acme/app/pull/12/",
    ],
)
def test_start_takes_urls_on_the_configured_github_only(
    sc_node: LocalNode, sc_home: Paths, text: str
) -> None:
    set_up(sc_home)
    with pytest.raises(BadInput) as refused:
        sc_node.start(text)
    message = str(refused.value)
    assert "\n" not in message
    assert "user or password" in message or "is not the configured GitHub (github.com" in message
    assert not list(sc_home.clones_dir.glob("*-*-*"))


def test_a_github_enterprise_host_is_taken_when_configured(sc_home: Paths) -> None:
    set_value(sc_home, "github.url", '"https://ghe.example.com:8443"')
    set_up(sc_home)
    view = local_node(sc_home).start("https://ghe.example.com:8443/acme/app/pull/12/")
    assert (view.target.key, view.target.kind) == ("acme/app#12", "pull")
    with pytest.raises(BadInput, match="is not the configured GitHub"):
        local_node(sc_home).start("https://github.com/acme/app/pull/12")


def test_an_empty_engine_name_is_refused(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    with pytest.raises(BadInput, match="--engine: expected an engine name"):
        sc_node.start("acme/app#1", engine="")


def test_start_refuses_a_repository_with_no_setup(sc_node: LocalNode) -> None:
    with pytest.raises(Refused, match=r"acme/app is not set up .*`shadowclone setup acme/app`"):
        sc_node.start("acme/app#1")


def test_start_refuses_a_setup_from_an_earlier_config_version(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home, config_version=1)
    sc_node.start("acme/app#1")
    newer = LocalNode(attrs.evolve(sc_node.config, version=2), sc_home, clock=sc_node.clock)
    with pytest.raises(
        Refused, match="config version 1 .* now at version 2; run `shadowclone setup"
    ):
        newer.start("acme/app#2")


def test_start_refuses_a_second_active_clone_for_one_issue(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home)
    first = sc_node.start("acme/app#1")
    with pytest.raises(Refused, match=f"already has an active clone: {first.id}"):
        sc_node.start("https://github.com/acme/app/pull/1")
    sc_node.start("acme/app#2")  # another issue is fine
    finish(sc_node, first.id)
    assert sc_node.start("acme/app#1").state is State.QUEUED  # once ended, a new clone may start


def test_a_stopped_queued_clone_is_no_longer_active(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    first = sc_node.start("acme/app#1")
    assert sc_node.stop(first.id).state is State.STOPPED
    assert sc_node.start("acme/app#1").id != first.id


def test_start_refuses_over_the_daily_limit(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    clock = [datetime(2026, 12, 2, 8, 0, tzinfo=UTC)]
    limited = LocalNode(
        attrs.evolve(sc_node.config, daily_clones=3), sc_home, clock=lambda: clock[0]
    )
    for number in range(1, 4):
        limited.start(f"acme/app#{number}")
        clock[0] += timedelta(hours=1)
    with pytest.raises(Refused, match=r"daily limit reached: 3 clones .*\(daily_clones = 3\)"):
        limited.start("acme/app#4")
    clock[0] = datetime(2026, 12, 3, 8, 0, 1, tzinfo=UTC)  # the first is now over 24 hours old
    limited.start("acme/app#4")
    with pytest.raises(Refused, match="daily limit"):
        limited.start("acme/app#5")


def test_chatgpt_plan_login_is_refused_on_a_public_repository(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home, visibility="public")
    sc_node.start("acme/app#1")  # the scripted engine's login has no such limit
    plan = LocalNode(
        attrs.evolve(sc_node.config, providers={"codex": ProviderConfig(login="chatgpt-plan")}),
        sc_home,
    )
    if "codex" not in plan.registry.names(Family.ENGINE):
        skip_or_fail("the codex engine plugin is not installed")
    with pytest.raises(Refused, match="chatgpt-plan login never works on public acme/app"):
        plan.start("acme/app#2", engine="codex")


def test_unknown_clone_ids_are_one_clear_line(sc_node: LocalNode) -> None:
    for operation in (sc_node.get, sc_node.stop, lambda i: sc_node.send(i, "hi")):
        with pytest.raises(NotFound, match="no clone 'nope'; `shadowclone list` shows the clones"):
            operation("nope")


def test_send_appends_to_an_active_clones_inbox_only(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    line = sc_node.send(view.id, "please also update the docs")
    inbox, problems, _ = RunFolder(sc_home.clones_dir / view.id).inbox()
    assert [i.id for i in inbox] == [line.id] and not problems
    with pytest.raises(BadInput):
        sc_node.send(view.id, "   ")
    finish(sc_node, view.id)
    with pytest.raises(Refused, match="is done; it takes no messages"):
        sc_node.send(view.id, "too late")


def test_send_refuses_once_the_clone_is_saving_or_has_finished(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    """The clone closes its inbox (under the inbox lock) before it saves: from then on a
    message could reach no engine, so `send` says so rather than accept it."""
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / view.id)
    sc_node.send(view.id, "in time")
    folder.append_progress(ProgressLine(step=Step.SAVE, kind=ProgressKind.NOTE, text=INBOX_CLOSED))
    with pytest.raises(Refused, match="is saving its work; it takes no more messages"):
        sc_node.send(view.id, "too late")
    folder.append_progress(
        ProgressLine(step=Step.FINISH, kind=ProgressKind.FINAL, text="clone done")
    )
    with pytest.raises(Refused, match="has finished; it takes no more messages"):
        sc_node.send(view.id, "far too late")
    inbox, _, _ = folder.inbox()
    assert [line.text for line in inbox] == ["in time"]


def test_answer_accepts_only_an_open_question(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    ask(sc_node, view.id)
    assert sc_node.get(view.id).question is not None
    with pytest.raises(NotFound, match="has no question 'q9'"):
        sc_node.answer(view.id, "q9", "sqlite")
    with pytest.raises(BadInput, match="expected one of 'postgres', 'sqlite'"):
        sc_node.answer(view.id, "q1", "mysql")
    assert sc_node.answer(view.id, "q1", "2").text == "sqlite"
    assert sc_node.get(view.id).question is None  # answered, on its way to the clone
    with pytest.raises(Refused, match="q1 is already answered"):
        sc_node.answer(view.id, "q1", "postgres")


def test_answer_refuses_an_expired_question(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    ask(sc_node, view.id)
    RunFolder(sc_home.clones_dir / view.id).append_progress(
        ProgressLine(
            Step.ENGINE, ProgressKind.ANSWER, answer=Answer("q1", "sqlite", ChosenBy.TIMEOUT)
        )
    )
    with pytest.raises(Refused, match="q1 has expired: .* recommended option 'sqlite'"):
        sc_node.answer(view.id, "q1", "postgres")


def test_free_text_answers_where_allowed(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    ask(sc_node, view.id, free_text=True)
    assert sc_node.answer(view.id, "q1", "use duckdb").text == "use duckdb"


def test_stop_writes_the_marker_and_refuses_an_ended_clone(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    RunFolder(sc_home.clones_dir / view.id).write_record(Record(id=view.id, state=State.RUNNING))
    stopped = sc_node.stop(view.id)
    assert stopped.stop_requested and stopped.state is State.RUNNING  # serve acts on it
    assert RunFolder(sc_home.clones_dir / view.id).stop_marker() is not None
    with pytest.raises(Refused, match="is stopping; it takes no messages"):
        sc_node.send(view.id, "hi")
    finish(sc_node, view.id, State.STOPPED)
    with pytest.raises(Refused, match="has already ended: stopped"):
        sc_node.stop(view.id)


def test_stop_waits_for_a_launch_holding_the_stop_lock_and_says_what_it_did(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    """What serve's launch does under the clone's stop lock, here on a thread: `stop` waits
    for it, and says `running`; the lock file is the owner's alone."""
    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / view.id)
    holding, go = threading.Event(), threading.Event()

    def launch() -> None:
        with folder.stop_lock(timeout=5):
            holding.set()
            go.wait(5)
            folder.write_record(Record(id=view.id, state=State.RUNNING, started_at=now()))

    launching = threading.Thread(target=launch)
    launching.start()
    holding.wait(5)
    timer = threading.Timer(0.2, go.set)
    timer.start()
    stopped = sc_node.stop(view.id)
    launching.join(5)
    assert (stopped.state, stopped.stop_requested) == (State.RUNNING, True)
    assert stat.S_IMODE(os.stat(folder.path / "stop.json.lock").st_mode) == 0o600

    queued = sc_node.start("acme/app#2")
    said = sc_node.stop(queued.id)
    assert (said.state, said.stop_requested) == (State.STOPPED, True)
    sc_node.start("acme/app#2")  # its issue is free at once


def test_malformed_files_are_reported_by_name_never_a_crash(
    sc_node: LocalNode, sc_home: Paths
) -> None:
    set_up(sc_home)
    good = sc_node.start("acme/app#1")
    bad = sc_node.start("acme/app#2")
    request_file = RunFolder(sc_home.clones_dir / bad.id).request_file
    request_file.write_text("{not json")
    listing = sc_node.list()
    assert [v.id for v in listing.clones] == [good.id]
    assert listing.problems == [
        f"{request_file}: not valid JSON (Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1))"
    ]
    with pytest.raises(MalformedFile, match=str(request_file)):
        sc_node.get(bad.id)
    folder = RunFolder(sc_home.clones_dir / good.id)
    folder.record_file.write_text('{"id": 3}')
    folder.progress_file.write_text('{"step": "nope"}\n')
    view = sc_node.get(good.id)
    assert view.state is State.QUEUED
    assert any(str(folder.record_file) in p for p in view.problems)
    assert any(str(folder.progress_file) in p for p in view.problems)


def test_list_shows_recent_and_every_active_clone(sc_node: LocalNode, sc_home: Paths) -> None:
    set_up(sc_home)
    clock = [datetime(2026, 12, 1, tzinfo=UTC)]
    timed = LocalNode(sc_node.config, sc_home, clock=lambda: clock[0])
    ids = []
    for number in range(1, 8):
        ids.append(timed.start(f"acme/app#{number}").id)
        clock[0] += timedelta(minutes=1)
    for clone_id in ids[1:]:
        finish(sc_node, clone_id)
    shown = [v.id for v in timed.list(limit=3).clones]
    assert shown == [ids[6], ids[5], ids[4], ids[0]]  # three newest, and the old active one
    assert len(timed.list(include_all=True).clones) == 7


def test_follow_streams_lines_until_the_final_line(sc_node: LocalNode, sc_home: Paths) -> None:
    import threading
    import time

    set_up(sc_home)
    view = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / view.id)
    folder.append_progress(ProgressLine(Step.TARGET, ProgressKind.NOTE, "issue #1"))

    def clone() -> None:
        for text in ("cloned", "working"):
            time.sleep(0.2)
            folder.append_progress(ProgressLine(Step.WORKSPACE, ProgressKind.NOTE, text))
        folder.append_progress(ProgressLine(Step.FINISH, ProgressKind.FINAL, "done"))

    writer = threading.Thread(target=clone)
    writer.start()
    seen = [line.text for line in sc_node.follow(view.id, poll_s=0.2)]
    writer.join()
    assert seen == ["issue #1", "cloned", "working", "done"]


def test_start_reads_only_the_active_clones_on_its_own_target(
    sc_node: LocalNode, sc_home: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With many clones queued (serve down), a start reads the folders of none of them but
    those on its own issue: the active markers name their targets."""
    set_up(sc_home)
    queued = [sc_node.start(f"acme/app#{number}").id for number in range(1, 41)]
    read: list[str] = []
    original = views.read_view

    def counted(folder: RunFolder, lines: int = 0) -> CloneView:
        read.append(folder.id)
        return original(folder, lines)

    monkeypatch.setattr(clones_module, "read_view", counted)
    with pytest.raises(ShadowcloneError, match="already has an active clone"):
        sc_node.start("ACME/app#7")  # GitHub's letter case does not matter
    assert read == [queued[6]]
    read.clear()
    sc_node.start("acme/app#99")
    assert read == []
