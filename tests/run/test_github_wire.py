"""How the clone's GitHub client travels: rate limits of both kinds waited out as GitHub
documents them, every page of a list followed, and the token kept to GitHub's own hosts."""

from __future__ import annotations

import email.utils
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.errors import Refused
from shadowclone.run.github.wire import SECONDARY_WAIT_S, Wire, rate_limit_wait

NOW = 1_800_000_000.0


def clock() -> float:
    return NOW


def test_a_primary_limit_waits_until_its_reset() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}
    wait = rate_limit_wait(403, headers, {"message": "API rate limit exceeded"}, clock=clock)
    assert wait is not None
    assert wait[0] == 42.0 and wait[1].startswith("primary rate limit")


@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_limit_waits_its_retry_after_in_seconds_or_as_a_date(status: int) -> None:
    message = {"message": "You have exceeded a secondary rate limit."}
    assert rate_limit_wait(status, {"retry-after": "7"}, message, clock=clock) == (
        7.0,
        "secondary rate limit",
    )
    date = email.utils.formatdate(NOW + 9, usegmt=True)
    assert rate_limit_wait(status, {"retry-after": date}, message, clock=clock) == (
        9.0,
        "secondary rate limit",
    )
    # One that names no wait leaves it to the caller.
    assert rate_limit_wait(status, {}, message, clock=clock) == (None, "secondary rate limit")


def test_other_refusals_are_no_rate_limit() -> None:
    assert rate_limit_wait(403, {"x-ratelimit-remaining": "12"}, {"message": "no"}) is None
    assert rate_limit_wait(404, {"retry-after": "1"}, None) is None
    assert rate_limit_wait(200, {"x-ratelimit-remaining": "0"}, None) is None


@given(
    status=st.sampled_from([403, 429, 200, 404, 500]),
    headers=st.dictionaries(
        st.sampled_from(["retry-after", "x-ratelimit-remaining", "x-ratelimit-reset"]),
        st.one_of(
            st.text(max_size=40),
            st.sampled_from(["nan", "inf", "-inf", "0", "1e300", "-5", "Wed, 21 Oct 2015"]),
        ),
    ),
    message=st.one_of(st.none(), st.text(max_size=60)),
)
def test_any_answer_gives_a_wait_that_is_a_real_number_or_none(
    status: int, headers: dict[str, str], message: str | None
) -> None:
    wait = rate_limit_wait(status, headers, {"message": message}, clock=clock)
    if wait is not None:
        seconds, why = wait
        assert seconds is None or 0.0 <= seconds < 1e7
        assert why


class _Script(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) the test queued; the last
    one stays."""

    server: _ScriptServer

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        status, headers, body = (
            self.server.answers.pop(0) if len(self.server.answers) > 1 else self.server.answers[0]
        )
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value.replace("{base}", self.server.base))
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test reads `seen`


class _ScriptServer(http.server.ThreadingHTTPServer):
    answers: list[tuple[int, dict[str, str], object]]
    seen: list[str]
    base: str


@pytest.fixture
def scripted() -> Iterator[_ScriptServer]:
    server = _ScriptServer(("127.0.0.1", 0), _Script)
    server.answers, server.seen = [], []
    server.base = f"http://127.0.0.1:{server.server_address[1]}/api/v3"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_wire_waits_out_both_kinds_and_says_so(scripted: _ScriptServer) -> None:
    scripted.answers = [
        (429, {"retry-after": "0"}, {"message": "You have exceeded a secondary rate limit."}),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"}, {"message": "limit"}),
        (200, {}, {"login": "octo"}),
    ]
    told: list[tuple[float, str]] = []
    with Wire("ghp_x", api_url=scripted.base, waited=lambda s, why: told.append((s, why))) as wire:
        assert wire.call("read", "GET", "/user").text("login") == "octo"
    assert [why.split(" (")[0] for _, why in told] == [
        "secondary rate limit",
        "primary rate limit",
    ]
    assert len(scripted.seen) == 3


def test_a_wait_past_the_bound_fails_in_one_line(scripted: _ScriptServer) -> None:
    scripted.answers = [(403, {"retry-after": "3600"}, {"message": "secondary rate limit"})]
    with (
        Wire("ghp_x", api_url=scripted.base, max_wait_s=60) as wire,
        pytest.raises(Refused) as raised,
    ):
        wire.call("read the user", "GET", "/user")
    assert "secondary rate limit to read the user asks a wait of 3600 s" in str(raised.value)
    assert len(scripted.seen) == 1


def test_a_secondary_limit_without_a_wait_waits_a_minute(scripted: _ScriptServer) -> None:
    scripted.answers = [(403, {}, {"message": "You have exceeded a secondary rate limit"})]
    told: list[float] = []
    with (
        Wire(
            "ghp_x", api_url=scripted.base, max_wait_s=1, waited=lambda s, _: told.append(s)
        ) as wire,
        pytest.raises(Refused, match="asks a wait of 60 s"),
    ):
        wire.call("read", "GET", "/user")
    assert told == [] and SECONDARY_WAIT_S == 60


def test_every_page_is_followed_and_a_page_elsewhere_is_refused(
    scripted: _ScriptServer,
) -> None:
    scripted.answers = [
        (200, {"link": '<{base}/items?page=2&per_page=100>; rel="next"'}, [{"n": 1}]),
        (200, {"link": '<{base}/items?page=3&per_page=100>; rel="next"'}, [{"n": 2}]),
        (200, {}, [{"n": 3}]),
    ]
    with Wire("ghp_x", api_url=scripted.base) as wire:
        items, cut = wire.pages("list", "/items")
        assert ([item.number("n") for item in items], cut) == ([1, 2, 3], False)
        assert scripted.seen[0] == "/api/v3/items?per_page=100"
        assert scripted.seen[1:] == [
            "/api/v3/items?page=2&per_page=100",
            "/api/v3/items?page=3&per_page=100",
        ]

        scripted.seen.clear()
        scripted.answers = [(200, {"link": '<{base}/items?page=2>; rel="next"'}, [{"n": 1}])]
        items, cut = wire.pages("list", "/items", max_pages=3)
        assert (len(items), cut) == (3, True)

        scripted.answers = [(200, {"link": '<http://elsewhere.example/x>; rel="next"'}, [])]
        with pytest.raises(Exception, match="next page to list is elsewhere"):
            wire.pages("list", "/items")


def test_graphql_is_beside_the_rest_root() -> None:
    assert Wire("t", api_url="https://api.github.com").graphql_url == (
        "https://api.github.com/graphql"
    )
    assert Wire("t", api_url="https://ghe.example/api/v3/").graphql_url == (
        "https://ghe.example/api/graphql"
    )
