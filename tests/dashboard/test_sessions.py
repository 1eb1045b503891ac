"""Logging in and out: the token never goes in a URL, a login link logs in once, a login
opens a session of its own (a new cookie and CSRF value), and a session ends when idle, when
too old, and when its owner logs out."""

from __future__ import annotations

import re

import httpx2
from shadowclone.dashboard.keys import LOGIN_CODE_S, login_code
from shadowclone.dashboard.sessions import ABSOLUTE_S, IDLE_S
from shadowclone.plugin.node import LocalNode
from shadowclone_testing.web import Site

COOKIE = "shadowclone_session"


def csrf_of(page: str) -> str:
    found = re.search(r"name='csrf' value='([\w-]+)'", page)
    assert found, "the page has a form with its CSRF value"
    return found.group(1)


def test_the_token_goes_in_no_url_and_a_login_link_logs_in_once(site: Site) -> None:
    with site.client() as browser:
        refused = browser.get("/login", params={"token": site.token})
        assert refused.status_code == 401 and "goes in no URL" in refused.text
        assert COOKIE not in browser.cookies and browser.get("/").status_code == 401
    link = site.login_url()
    assert site.token not in link
    with site.client() as browser:
        assert browser.get(link).status_code == 303
        assert browser.get("/").status_code == 200
    with site.client() as other:
        used = other.get(link)
        assert used.status_code == 401 and "used already" in used.text
        assert other.get("/").status_code == 401
    late = site.login_url()
    site.clock.later(LOGIN_CODE_S + 1)
    with site.client() as browser:
        expired = browser.get(late)
        assert expired.status_code == 401 and "has expired" in expired.text
        before = login_code(site.token, now=site.dashboard.started - 60)
        assert browser.get("/login", params={"code": before}).status_code == 401
        forged = browser.get("/login", params={"code": f"{link[-40:]}.1.x"})
        assert forged.status_code == 401 and "not one of this dashboard" in forged.text
        # The form takes the token in its body.
        assert browser.post("/login", data={"token": "nope"}).status_code == 401
        assert browser.post("/login", data={"token": site.token}).status_code == 303
        assert browser.get("/").status_code == 200


def test_a_login_opens_a_new_session_with_its_own_csrf_value(site: Site) -> None:
    with site.logged_in() as browser:
        first_cookie, first_csrf = browser.cookies[COOKIE], csrf_of(browser.get("/").text)
        assert browser.get(site.login_url()).status_code == 303
        second_cookie, second_csrf = browser.cookies[COOKIE], csrf_of(browser.get("/").text)
    assert first_cookie != second_cookie and first_csrf != second_csrf
    assert len(second_cookie) >= 40 and site.token not in (second_cookie, second_csrf)
    with site.client(cookies={COOKIE: first_cookie}) as replay:
        assert replay.get("/").status_code == 401  # the old session ended with the new login
    with site.client(cookies={COOKIE: second_cookie}) as kept:
        assert kept.get("/").status_code == 200


def test_a_session_ends_when_idle_and_when_too_old(site: Site) -> None:
    with site.logged_in() as browser:
        site.clock.later(IDLE_S - 60)
        assert browser.get("/").status_code == 200  # used: idle from now on
        site.clock.later(IDLE_S - 60)
        assert browser.get("/").status_code == 200
        site.clock.later(IDLE_S + 1)
        assert browser.get("/").status_code == 401
    with site.logged_in() as busy:
        used = 0.0
        while used + IDLE_S / 2 < ABSOLUTE_S:
            site.clock.later(IDLE_S / 2)
            used += IDLE_S / 2
            assert busy.get("/").status_code == 200
        site.clock.later(IDLE_S / 2)
        assert busy.get("/").status_code == 401  # however busy, too old


def test_logging_out_ends_the_session_and_its_streams(sc_node: LocalNode, site: Site) -> None:
    with site.logged_in() as browser, browser.stream("GET", "/events") as events:
        lines = events.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
        cookie, csrf = browser.cookies[COOKIE], csrf_of(browser.get("/").text)
        assert browser.post("/logout", data={}).status_code == 403  # a form needs its CSRF
        out = browser.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert browser.get("/").status_code == 401
        rest = list(lines)  # the stream ends with its session
        assert not any(line.startswith("data:") for line in rest)
    with site.client(cookies={COOKIE: cookie}) as replay:
        assert replay.get("/").status_code == 401
    with httpx2.Client(base_url=site.url, timeout=10) as script:  # a script's token is no session
        said = script.post("/logout", headers={"Authorization": f"Bearer {site.token}"})
        assert said.status_code == 200
