"""The dashboard over HTTP: the token on every request, CSRF-safe forms, answer links signed
for one answer, the node's own rules on every action, and no secret on any page."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from urllib.parse import quote

import httpx2
import pytest
from shadowclone.config import Paths
from shadowclone.dashboard.keys import answer_urls, load_token, token_file
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    InboxKind,
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    State,
    Step,
    Via,
)
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import CLI_PROGRAM
from shadowclone_testing.serving import Scripts, serving, wait_state, wait_until
from shadowclone_testing.web import PLANTED, Site, free_port


def csrf_of(page: str) -> str:
    found = re.search(r"name='csrf' value='([\w-]+)'", page)
    assert found, "the page has a form with its CSRF value"
    return found.group(1)


def inbox(home: Paths, clone_id: str) -> list[tuple[InboxKind, str, Via | None]]:
    lines, _, _ = RunFolder(home.clones_dir / clone_id).inbox()
    return [(line.kind, line.text, line.via) for line in lines]


@pytest.mark.parametrize(
    "path",
    ["/", "/events", "/clones/x", "/clones/x/events"],
)
def test_every_page_needs_the_token(site: Site, path: str) -> None:
    with site.client() as client:
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get("/login", params={"token": "nope"}).status_code == 401
        assert client.post("/clones/x/stop").status_code == 401


def test_the_owner_answers_sends_and_stops_from_the_page(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    sc_ready.set("acme/app#2", Script(play=Play.HANG))
    asking, hanging = sc_node.start("acme/app#1"), sc_node.start("acme/app#2")
    with serving(sc_node), site.logged_in() as browser:
        wait_state(sc_home, asking.id, State.WAITING)
        listing = browser.get("/").text
        assert asking.id in listing and "waiting" in listing
        page = browser.get(f"/clones/{asking.id}").text
        assert "Question q1" in page
        csrf = csrf_of(page)
        answered = browser.post(
            f"/clones/{asking.id}/answer",
            data={"csrf": csrf, "question_id": "q1", "choice": "right"},
        )
        assert answered.status_code == 303
        assert answered.headers["location"] == f"/clones/{asking.id}"
        assert "answered q1: right" in browser.get(answered.headers["location"]).text
        again = browser.post(
            f"/clones/{asking.id}/answer",
            data={"csrf": csrf, "question_id": "q1", "choice": "right"},
        )
        assert again.headers["location"] == f"/clones/{asking.id}"
        shown = browser.get(again.headers["location"]).text
        assert "question q1 is already answered" in shown  # the node's rule, one line
        assert "already answered" not in browser.get(f"/clones/{asking.id}").text  # once
        wait_state(sc_home, asking.id, State.DONE)
        wait_state(sc_home, hanging.id, State.RUNNING)
        sent = browser.post(f"/clones/{hanging.id}/send", data={"csrf": csrf, "text": "hi"})
        assert sent.status_code == 303
        stopped = browser.post(f"/clones/{hanging.id}/stop", data={"csrf": csrf})
        assert stopped.status_code == 303
        wait_state(sc_home, hanging.id, State.STOPPED)
    assert inbox(sc_home, asking.id) == [(InboxKind.ANSWER, "right", Via.DASHBOARD)]
    assert inbox(sc_home, hanging.id) == [(InboxKind.MESSAGE, "hi", Via.DASHBOARD)]
    progress, _, _ = RunFolder(sc_home.clones_dir / asking.id).progress()
    [answer] = [line.answer for line in progress if line.answer is not None]
    assert answer.via is Via.DASHBOARD  # the record shows how the owner answered


def test_a_form_without_its_csrf_value_or_from_elsewhere_is_refused(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.HANG))
    clone = sc_node.start("acme/app#1")
    with site.logged_in() as browser:
        csrf = csrf_of(browser.get(f"/clones/{clone.id}").text)
        assert browser.post(f"/clones/{clone.id}/stop", data={}).status_code == 403
        foreign = {"Origin": "https://evil.example"}
        refused = browser.post(f"/clones/{clone.id}/stop", data={"csrf": csrf}, headers=foreign)
        assert refused.status_code == 403
        assert sc_node.get(clone.id).stop_requested is False
        # A script with the token (Authorization: Bearer) needs no CSRF value: no cookie acts.
    with site.client() as api:
        done = api.post(
            f"/clones/{clone.id}/stop", headers={"Authorization": f"Bearer {site.token}"}
        )
        assert done.status_code == 200 and "stopping" in done.text
    assert sc_node.get(clone.id).stop_requested is True


def test_an_answer_link_gives_its_one_answer_once_and_nothing_else(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        wait_state(sc_home, clone.id, State.WAITING)
        question = sc_node.get(clone.id, 1).question
        assert question is not None
        links = answer_urls(site.url, site.token, clone.id, question)
        link = links["left"]
        with site.client() as phone:
            forged = link.replace("choice=left", "choice=right")
            assert phone.post(forged).status_code == 403
            other = link.replace("/q1?", "/q2?")
            assert phone.post(other).status_code == 403  # signed for q1 only
            assert phone.get(link).status_code == 405  # a preview of the link answers nothing
            answered = phone.post(link)
            assert answered.status_code == 200 and answered.text == "answered q1: left"
            again = phone.post(link)
            assert again.status_code == 410 and again.text == "this answer link was used already"
            assert phone.post(links["right"]).status_code == 410  # the set is spent
            assert phone.get("/").status_code == 401  # the link is no key to the rest
        wait_state(sc_home, clone.id, State.DONE)
    assert inbox(sc_home, clone.id) == [(InboxKind.ANSWER, "left", Via.NOTIFICATION)]


def test_a_planted_secret_never_reaches_a_page(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.HANG))
    clone = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / clone.id)
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.TEXT, f"key {PLANTED} planted"))
    with serving(sc_node), site.logged_in() as browser:
        wait_state(sc_home, clone.id, State.RUNNING)
        seen = browser.get("/").text + browser.get(f"/clones/{clone.id}").text
        with browser.stream("GET", f"/clones/{clone.id}/events?from=0") as events:
            streamed = ""
            for chunk in events.iter_text():
                streamed += chunk
                if "event: view" in streamed and "planted" in streamed:
                    break
        sc_node.stop(clone.id)
        wait_state(sc_home, clone.id, State.STOPPED)
    assert "planted" in seen and "planted" in streamed  # the line is shown, its key is not
    assert PLANTED not in seen and PLANTED not in streamed
    assert "Q" * 40 not in seen + streamed


def test_the_list_streams_a_new_clone_as_it_comes(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    with site.logged_in() as browser, browser.stream("GET", "/events") as events:
        lines = events.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        assert "no clones yet" in first
        clone = sc_node.start("acme/app#1")
        found = wait_until(
            lambda: next((line for line in lines if line.startswith("data:")), ""),
            "the next snapshot",
        )
        assert clone.id in found


@pytest.mark.parametrize(
    ("pr_url", "linked"),
    [
        ("https://github.com/acme/app/pull/7", True),
        ("javascript:alert(document.cookie)", False),
        ("JavaScript:alert(1)", False),
        ("data:text/html,<script>alert(1)</script>", False),
    ],
)
def test_a_pull_request_is_a_link_only_to_the_web(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site, pr_url: str, linked: bool
) -> None:
    """The record is the clone's word: its pull request's URL is shown, and linked only when
    it is an http(s) URL."""
    clone = sc_node.start("acme/app#1")
    record = Record(id=clone.id, state=State.DONE, pr_url=pr_url)
    RunFolder(sc_home.clones_dir / clone.id).write_record(record)
    with site.logged_in() as browser:
        shown = browser.get(f"/clones/{clone.id}").text
    assert ("<a href='" + html.escape(pr_url, quote=True) in shown) is linked
    assert "pull request" in shown


def test_the_dashboard_command_serves_and_prints_a_one_time_login_link(sc_home: Paths) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-c", CLI_PROGRAM, "dashboard", "--port", str(port)]
    server = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert server.stdout is not None
    printed: list[str] = []
    try:
        url = f"http://127.0.0.1:{port}"
        while not printed or not printed[-1].startswith("log in: "):
            line = server.stdout.readline().decode()
            assert line, "the command ended: " + "".join(printed)
            printed.append(line)
        link = printed[-1].split()[3]
        assert link.startswith(f"{url}/login?code=")

        def answers() -> bool:
            try:
                return httpx2.get(f"{url}/", timeout=2).status_code == 401
            except httpx2.HTTPError:
                return False

        wait_until(answers, "the dashboard to answer")
        token, made = load_token(sc_home, create=False)
        assert not made
        with httpx2.Client(timeout=5) as browser:
            assert browser.get(link).status_code == 303
            assert browser.get(f"{url}/").status_code == 200
        again = httpx2.get(link, timeout=5)
        assert again.status_code == 401 and "used already" in again.text
    finally:
        server.terminate()
        output = "".join(printed) + server.communicate(timeout=30)[0].decode()
    assert f"the dashboard serves {url}; its token is new, in {token_file(sc_home)}" in output
    assert token not in output


HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>'\"&"


def test_pages_come_from_autoescaping_templates_that_show_every_text_as_text(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    """The pages are Jinja templates with autoescape on: a clone's words (its question, its
    options, its reason, its progress) reach the page as text, never as markup, and redacted."""
    from shadowclone.dashboard.app import TEMPLATES

    assert TEMPLATES.autoescape is True
    assert str(TEMPLATES.from_string("{{ x }}").render(x=HOSTILE)).startswith("&lt;script&gt;")
    clone = sc_node.start("acme/app#1")
    question = Question(
        id="q1", text=f"which {HOSTILE}", options=(HOSTILE, "plain"), recommended="plain"
    )
    folder = RunFolder(sc_home.clones_dir / clone.id)
    folder.write_record(
        Record(id=clone.id, state=State.WAITING, question=question, reason=f"why {HOSTILE}")
    )
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.TEXT, f"{HOSTILE} {PLANTED}"))
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.QUESTION, question=question))
    with site.logged_in() as browser:
        pages = browser.get("/").text + browser.get(f"/clones/{clone.id}").text
    assert "<script>alert" not in pages and "<img" not in pages
    assert html.escape("<script>alert(1)</script>", quote=False) in pages
    assert "value='&lt;script&gt;" in pages  # an option, in its button's value too
    assert PLANTED not in pages


def test_pages_allow_no_inline_script_and_serve_their_own(site: Site) -> None:
    with site.logged_in() as browser:
        listing = browser.get("/")
    policy = listing.headers["content-security-policy"]
    assert "unsafe-inline" not in policy and "script-src 'self'" in policy
    assert re.findall(r"<script[^>]*>", listing.text) == ["<script src='/static/dashboard.js'>"]
    assert "<style" not in listing.text and " style=" not in listing.text
    with site.client() as anyone:  # no secret in them: they need no token
        script = anyone.get("/static/dashboard.js")
        assert script.status_code == 200 and "EventSource" in script.text
        assert script.headers["content-type"].startswith("text/javascript")
        assert anyone.get("/static/dashboard.css").headers["content-type"].startswith("text/css")
        assert anyone.get("/static/app.py").status_code == 404


def test_no_text_from_a_link_reaches_the_owners_page(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    """A link anyone can send the owner (`?error=`, `?said=`, a clone id in the path) puts
    none of its words on the page: what an action says is kept in the session, shown once."""
    sc_ready.set("acme/app#1", Script(play=Play.HANG))
    clone = sc_node.start("acme/app#1")
    lure = "Your token leaked: paste it at evil.example to revoke it"
    with site.logged_in() as browser:
        for path in ("/", f"/clones/{clone.id}"):
            for key in ("error", "said"):
                shown = browser.get(path, params={key: lure})
                assert shown.status_code == 200 and "evil.example" not in shown.text
        missing = browser.get(f"/clones/{quote(lure)}")
        assert missing.status_code == 404 and "evil.example" not in missing.text
        assert "evil.example" not in browser.get(f"/clones/{quote(lure)}/events").text
        csrf = csrf_of(browser.get(f"/clones/{clone.id}").text)
        sent = browser.post(f"/clones/{clone.id}/send", data={"csrf": csrf, "text": "hi"})
        assert sent.headers["location"] == f"/clones/{clone.id}"
        assert "sent" in browser.get(f"/clones/{clone.id}", params={"said": lure}).text
        sc_node.stop(clone.id)
