"""Live streams are capped: a few for each session, and a bound in all, so that pages left
open (or opened on purpose by the hundred) cannot slow the dashboard for everyone."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator

from shadowclone.dashboard.app import STREAMS_PER_CLIENT, STREAMS_TOTAL
from shadowclone_testing.serving import wait_until
from shadowclone_testing.web import Site

COOKIE = "shadowclone_session"


@contextlib.contextmanager
def streams(site: Site, count: int, headers: str) -> Iterator[list[tuple[int, str]]]:
    """`count` streams of the list asked for at once, each on a connection of its own, held
    open meanwhile: each one's status and head."""
    port = int(site.url.rsplit(":", 1)[1])
    opened = []
    try:
        for _ in range(count):
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            request = f"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n"
            connection.sendall(request.encode())
            opened.append(connection)
        answers = []
        for connection in opened:
            head = b""
            while b"\r\n\r\n" not in head:
                head += connection.recv(4096)
            found = re.match(rb"HTTP/1.1 (\d+)", head)
            assert found, head
            answers.append((int(found.group(1)), head.decode(errors="replace").lower()))
        yield answers
    finally:
        for connection in opened:
            connection.close()


def statuses(answers: list[tuple[int, str]]) -> list[int]:
    return sorted(status for status, _ in answers)


def test_each_session_has_a_few_streams_and_all_have_a_bound(site: Site) -> None:
    with site.logged_in() as browser:
        cookie = f"Cookie: {COOKIE}={browser.cookies[COOKIE]}\r\n"
        with streams(site, STREAMS_PER_CLIENT + 3, cookie) as answers:
            assert statuses(answers) == [200] * STREAMS_PER_CLIENT + [429] * 3
            refused = next(head for status, head in answers if status == 429)
            assert "retry-after: 10" in refused
            assert browser.get("/").status_code == 200  # the pages themselves still come
        # Closed, they give their places back.
        wait_until(lambda: not site.dashboard.streams, "the closed streams to end")
        with streams(site, STREAMS_PER_CLIENT, cookie) as again:
            assert statuses(again) == [200] * STREAMS_PER_CLIENT
    bearer = f"Authorization: Bearer {site.token}\r\n"
    with streams(site, STREAMS_PER_CLIENT + 1, bearer) as scripts:
        assert statuses(scripts) == [200] * STREAMS_PER_CLIENT + [429]


def test_two_hundred_streams_get_no_more_than_the_bound_in_all(site: Site) -> None:
    with contextlib.ExitStack() as stack:
        accepted = 0
        for _ in range(200 // STREAMS_PER_CLIENT):
            browser = stack.enter_context(site.logged_in())
            cookie = f"Cookie: {COOKIE}={browser.cookies[COOKIE]}\r\n"
            answers = stack.enter_context(streams(site, STREAMS_PER_CLIENT, cookie))
            accepted += statuses(answers).count(200)
        assert accepted == STREAMS_TOTAL
        assert browser.get("/").status_code == 200
