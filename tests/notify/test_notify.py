"""Notifications from serve: a question, a cap's pause, a schedule and each ending reach the
configured notifiers (a local webhook receiver, a local ntfy-compatible server), signed; a
notifier that fails is tried again and never disturbs serve."""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.config import Paths, load_config, set_value
from shadowclone.dashboard.keys import load_token, read_answer_link
from shadowclone.errors import PluginUnavailable
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    Answer,
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    State,
    Step,
    Via,
)
from shadowclone.notify.builtin import SIGNATURE_HEADER
from shadowclone.notify.dispatch import Dispatcher, make_dispatcher, notable
from shadowclone.plugin import LaunchSpec, Notification, NotifyEvent, load_registry
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.serving import FAST, Scripts, serving, wait_state, wait_until
from shadowclone_testing.web import free_port

QUICK = attrs.evolve(FAST, notify_backoff_s=(0.05, 0.05))


@attrs.define
class Receiver:
    """A local HTTP server that keeps every POST: a webhook receiver, or an ntfy server."""

    status: int = 200
    posts: list[tuple[str, dict[str, str], bytes]] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for _, _, body in self.posts]

    def events(self) -> list[str]:
        return [str(b.get("event") or b.get("tags", ["?"])[0]) for b in self.bodies()]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with found.lock:
                found.posts.append((self.path, dict(self.headers), body))
            self.send_response(found.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    found.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def configured(node: LocalNode, **keys: str) -> LocalNode:
    for key, value in keys.items():
        set_value(node.paths, key.replace("__", "."), value)
    config, paths = load_config(node.paths)
    return LocalNode(config, paths, registry=node.registry)


def test_a_question_and_the_end_reach_the_webhook_signed(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, receiver: Receiver
) -> None:
    sc_node = configured(
        sc_node,
        notify__use='["webhook"]',
        notify__webhook__url=json.dumps(receiver.url + "/hook"),
        dashboard__url='"https://dash.example.net"',
    )
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, QUICK):
        wait_until(lambda: "question" in receiver.events(), "the question's notification")
        sc_node.answer(clone.id, "q1", "right")
        wait_state(sc_home, clone.id, State.DONE)
        wait_until(lambda: "done" in receiver.events(), "the end's notification")
    assert receiver.events() == ["question", "done"]
    key = (sc_home.config_file.parent / "notify" / "webhook" / "webhook.key").read_bytes().strip()
    for path, headers, body in receiver.posts:
        assert path == "/hook"
        expected = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        assert headers[SIGNATURE_HEADER] == expected
    question, done = receiver.bodies()
    assert (question["clone_id"], question["target"]) == (clone.id, "acme/app#1")
    assert question["question_id"] == "q1" and question["options"]
    assert question["url"] == f"https://dash.example.net/clones/{clone.id}"
    token, _ = load_token(sc_home, create=False)
    nonces = set()
    for option, url in question["answer_urls"].items():
        assert url.startswith(f"https://dash.example.net/answer/{clone.id}/q1?")
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        link = read_answer_link(token, clone.id, "q1", query)
        assert link is not None and link.choice == option
        assert link.expires > datetime.now(UTC).timestamp()
        nonces.add(link.nonce)
    assert len(nonces) == 1  # one set of links for the question: one used spends them all
    assert "done" in done["title"]


def test_ntfy_gets_the_question_with_an_answer_button_per_option(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, receiver: Receiver
) -> None:
    sc_node = configured(
        sc_node,
        notify__use='["ntfy"]',
        notify__events='["question"]',
        notify__ntfy__url=json.dumps(receiver.url + "/my-topic"),
        dashboard__serve="true",
    )
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, QUICK):
        wait_until(receiver.bodies, "the question on the topic")
        sc_node.answer(clone.id, "q1", "left")
        wait_state(sc_home, clone.id, State.DONE)
    [message] = receiver.bodies()  # only the events the config names
    assert receiver.posts[0][0] == "/"
    assert message["topic"] == "my-topic" and message["tags"] == ["question"]
    assert message["priority"] == 4
    actions = message["actions"]
    assert [a["action"] for a in actions] == ["http"] * len(actions)
    assert all(a["method"] == "POST" and "/answer/" in a["url"] for a in actions)
    assert message["click"].endswith(f"/clones/{clone.id}")


def test_a_failing_notifier_is_tried_again_and_never_disturbs_serve(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, receiver: Receiver
) -> None:
    receiver.status = 500
    sc_node = configured(
        sc_node,
        notify__use='["webhook", "desktop-of-nobody"]',  # one broken, one unknown
        notify__webhook__url=json.dumps(receiver.url),
    )
    sc_ready.default = Script(play=Play.FINISH, steps=1)
    sc_ready.save()
    ids = [sc_node.start(f"acme/app#{n}").id for n in (1, 2, 3)]
    with serving(sc_node, QUICK):
        for clone_id in ids:
            wait_state(sc_home, clone_id, State.DONE)
        # Each ending: the first try and two more (QUICK's backoff), then given up.
        wait_until(lambda: len(receiver.posts) == 9, "three tries of each notification")
    log = sc_home.clones_dir.joinpath("serve.log").read_text()
    assert "notifier desktop-of-nobody is left out" in log
    assert "notifier webhook gave up" in log


class Flaky:
    """Fails its first `failures` deliveries, then keeps what it gets."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.got: list[Notification] = []

    def notify(self, notification: Notification) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("unreachable")
        self.got.append(notification)


class Hanging:
    def __init__(self) -> None:
        self.release = threading.Event()

    def notify(self, notification: Notification) -> None:
        self.release.wait(30)


def test_a_notifier_that_hangs_holds_up_neither_the_others_nor_the_caller() -> None:
    flaky, hanging = Flaky(failures=1), Hanging()
    dispatcher = Dispatcher({"flaky": flaky, "hanging": hanging}, ["done"], backoff_s=(0.01,))
    item = Notification(NotifyEvent.DONE, "c1", "a/b#1", "a/b#1 done", "done")
    for _ in range(3):
        dispatcher.put(item)  # returns at once
    dispatcher.put(attrs.evolve(item, event=NotifyEvent.QUESTION))  # not configured: dropped
    wait_until(lambda: len(flaky.got) == 3, "the flaky notifier's deliveries")
    hanging.release.set()
    dispatcher.close()
    assert all(n.event is NotifyEvent.DONE for n in flaky.got)


AT = datetime(2026, 12, 4, tzinfo=UTC)
STATES = st.sampled_from(list(State))
QUESTIONS = st.none() | st.builds(
    Question,
    id=st.sampled_from(["q1", "q2"]),
    text=st.just("Which?"),
    options=st.just(("a", "b")),
    recommended=st.just("a"),
    cap=st.booleans(),
)


@given(
    old_state=STATES,
    new_state=STATES,
    old_question=QUESTIONS,
    new_question=QUESTIONS,
    scheduled=st.booleans(),
)
def test_each_change_of_a_record_is_told_once_and_only_when_it_is_news(
    old_state: State,
    new_state: State,
    old_question: Question | None,
    new_question: Question | None,
    scheduled: bool,
) -> None:
    until = AT + timedelta(hours=1) if scheduled else None
    old = Record(id="c", state=old_state, question=old_question)
    new = Record(id="c", state=new_state, question=new_question, scheduled_until=until)
    event = notable(old, new)
    assert notable(new, new) is None  # writing the same record again tells nothing
    if new_state in (State.DONE, State.FAILED, State.STOPPED):
        assert (event is not None) == old_state.active
        if event is not None:
            assert event.value == new_state.value
    elif new_question is not None and (old_question is None or old_question.id != new_question.id):
        assert event is (NotifyEvent.PAUSED if new_question.cap else NotifyEvent.QUESTION)
    elif new_state is State.SCHEDULED and old_state is not State.SCHEDULED:
        assert event is NotifyEvent.SCHEDULED
    else:
        assert event is None


def test_an_unknown_event_in_the_config_is_one_line(sc_home: Paths, sc_cli: Any) -> None:
    set_value_error = sc_cli("config", "set", "notify.events", '["questions"]')
    assert set_value_error.code != 0
    assert "notify.events: unknown event 'questions'" in set_value_error.err
    assert "Traceback" not in set_value_error.err


def test_a_question_answered_from_its_ntfy_button_reaches_the_clone(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, receiver: Receiver
) -> None:
    """serve runs the dashboard too; the ntfy message's button, pressed as the ntfy app
    does (a POST of its URL), answers the question through it, and the clone goes on."""
    port = free_port()
    sc_node = configured(
        sc_node,
        notify__use='["ntfy"]',
        notify__ntfy__url=json.dumps(receiver.url + "/topic"),
        dashboard__serve="true",
        dashboard__port=str(port),
    )
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, QUICK):
        [message] = wait_until(receiver.bodies, "the question on the topic")
        button = next(a for a in message["actions"] if a["label"] == "left")
        assert button["url"].startswith(f"http://127.0.0.1:{port}/answer/{clone.id}/q1?")
        pressed = httpx2.post(button["url"], timeout=10)
        assert pressed.status_code == 200, pressed.text
        record = wait_state(sc_home, clone.id, State.DONE)
    assert record.report == "answered left"
    progress, _, _ = RunFolder(sc_home.clones_dir / clone.id).progress()
    [answer] = [line.answer for line in progress if line.answer is not None]
    assert answer.via is Via.NOTIFICATION


class Unlaunchable(FakeLauncher):
    def launch(self, spec: LaunchSpec) -> None:
        raise PluginUnavailable("the clone image is not on this machine")


def test_a_clone_serve_cannot_launch_is_told_as_such(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, receiver: Receiver
) -> None:
    sc_node = configured(
        sc_node, notify__use='["webhook"]', notify__webhook__url=json.dumps(receiver.url)
    )
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, QUICK, launcher=Unlaunchable(default_state_dir())):
        wait_state(sc_home, clone.id, State.FAILED)
        wait_until(receiver.bodies, "the notification")
    [told] = receiver.bodies()
    assert told["event"] == "launch-failed"
    assert "the clone image is not on this machine" in told["text"]


def test_the_desktop_notifier_runs_notify_send(
    sc_node: LocalNode,
    sc_home: Paths,
    sc_ready: Scripts,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stand-in notify-send on PATH keeps its arguments: the title and text it was given."""
    bin_dir, kept = tmp_path / "bin", tmp_path / "notify-send.args"
    bin_dir.mkdir()
    stand_in = bin_dir / "notify-send"
    stand_in.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {kept}\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    sc_node = configured(sc_node, notify__use='["desktop"]')
    sc_ready.set("acme/app#1", Script(play=Play.FINISH, steps=1))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node, QUICK):
        wait_state(sc_home, clone.id, State.DONE)
        wait_until(kept.exists, "notify-send to run")
    args = kept.read_text().splitlines()
    assert "--app-name=shadowclone" in args and "acme/app#1 done" in args
    assert any(clone.id in arg for arg in args)


def test_a_pause_at_a_cap_and_a_schedule_are_told_as_such(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, receiver: Receiver
) -> None:
    """What a running clone writes (here as the run program writes it) reaches the webhook
    as the event it is: a cap's question is a pause, a usage limit a schedule."""
    sc_node = configured(
        sc_node, notify__use='["webhook"]', notify__webhook__url=json.dumps(receiver.url)
    )
    sc_ready.set("acme/app#1", Script(play=Play.HANG))
    clone = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / clone.id)
    cap = Question("q7", "The clone reached its time cap.", ("raise", "finish"), "finish", cap=True)
    until = datetime.now(UTC) + timedelta(hours=2)
    with serving(sc_node, QUICK):
        wait_state(sc_home, clone.id, State.RUNNING)
        folder.append_progress(
            ProgressLine(Step.ENGINE, ProgressKind.QUESTION, cap.text, question=cap)
        )
        wait_until(lambda: "paused" in receiver.events(), "the pause's notification")
        folder.append_progress(
            ProgressLine(Step.ENGINE, ProgressKind.ANSWER, "raise", answer=Answer("q7", "raise"))
        )
        folder.append_progress(
            ProgressLine(Step.ENGINE, ProgressKind.SCHEDULED, "usage limit", until=until)
        )
        wait_until(lambda: "scheduled" in receiver.events(), "the schedule's notification")
        sc_node.stop(clone.id)
        wait_state(sc_home, clone.id, State.STOPPED)
        wait_until(lambda: "stopped" in receiver.events(), "the stop's notification")
    assert receiver.events() == ["paused", "scheduled", "stopped"]
    paused, scheduled, _ = receiver.bodies()
    assert paused["question_id"] == "q7" and "paused at a cap" in paused["title"]
    assert f"until {until.astimezone():%H:%M}" in scheduled["text"]


BROKEN_NOTIFIER = """
from shadowclone.plugin import NotifierRegistration, hookimpl

GOT = []


class Kept:
    def __init__(self, context):
        pass

    def notify(self, notification):
        GOT.append(notification.clone_id)


def broken(context):
    raise RuntimeError("this plugin's factory is broken")


@hookimpl
def shadowclone_notifiers():
    yield NotifierRegistration(name="kept", summary="keeps what it gets", factory=Kept)
    yield NotifierRegistration(name="broken", summary="cannot be built", factory=broken)
"""


def test_a_notifier_whose_factory_raises_anything_is_left_out_and_the_others_work(
    sc_node: LocalNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    (tmp_path / "mod_notifiers.py").write_text(BROKEN_NOTIFIER)
    monkeypatch.syspath_prepend(str(tmp_path))
    sc_node = configured(sc_node, notify__use='["broken", "kept"]')
    registry = load_registry(builtins=("mod_notifiers",), entry_points=())
    dispatcher = make_dispatcher(sc_node.config, sc_node.paths, registry, (0.01,))
    assert dispatcher is not None
    try:
        assert "notifier broken is left out: this plugin's factory is broken" in caplog.text
        dispatcher.put(Notification(NotifyEvent.DONE, "c1", "acme/app#1", "done", "done"))
        kept = importlib.import_module("mod_notifiers")
        wait_until(lambda: kept.GOT == ["c1"], "the notifier that could be built to be told")
    finally:
        dispatcher.close()
