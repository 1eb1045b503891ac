"""How the clone's GitHub client talks to one GitHub API: one request at a time, writes spaced,
rate limits waited out as GitHub documents them, every page of a list, GraphQL, and downloads.

gidgethub's sans-I/O half makes the headers and reads the answers (errors, rate limits, the
`Link` header's next page); httpx2 carries them. Callers never see a raw answer or a library's
exception: every failure becomes one `shadowclone.errors` line the owner can act on.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

import attrs
import gidgethub
import gidgethub.sansio
import httpx2

from shadowclone.errors import BadInput, Refused, ShadowcloneError
from shadowclone.httpio import retry_after_s


@attrs.frozen
class Outgoing:
    """One request as it goes out; `what` names it in every error."""

    what: str
    method: str
    url: str
    params: Mapping[str, str] | None = None
    body: Mapping[str, object] | None = None


class Sent(TypedDict, total=False):
    """What a call may send besides its path: a query and a JSON body."""

    params: Mapping[str, str] | None
    body: Mapping[str, object] | None


SECONDS_BETWEEN_WRITES = 1.0
"""GitHub asks for one request at a time per user and a second between writes (its secondary
rate limits); it asks no pause between reads."""
REQUESTER = "shadowclone"
"""The User-Agent GitHub asks every client to send."""
PER_PAGE = 100
"""The most GitHub gives in one page of a list."""
MAX_PAGES = 100
"""A list longer than this many pages (10,000 items) is cut, and the caller told."""
SECONDARY_WAIT_S = 60.0
"""GitHub's advice for a secondary rate limit that names no wait: at least a minute."""
RATE_LIMIT_TRIES = 5
"""Rate-limit refusals of one request waited out at most, before it fails."""
MAX_WAIT_S = 20 * 60.0
"""A rate limit that asks a longer wait than this fails the request instead: the owner is
told when it resets rather than left with a silent clone."""
GHOST = "ghost"
"""The login GitHub shows for a deleted account (its API answers `null`)."""

Waited = Callable[[float, str], None]
"""Told each rate-limit wait before it starts: seconds, and why in words."""


@attrs.frozen
class Answer:
    """One JSON object GitHub answered, read field by field: a field of the wrong type is one
    line naming the call and the field, not a crash further on."""

    data: Mapping[str, Any]
    what: str

    def _get(self, key: str, kind: type, expected: str) -> Any:
        value = self.data.get(key)
        # JSON's true and false are Python ints too: a number field must not take them.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise shape_error(self.what, f"{expected} {key!r}")
        return value

    def text(self, key: str) -> str:
        value: str = self._get(key, str, "a string")
        return value

    def text_or_none(self, key: str) -> str | None:
        return None if self.data.get(key) is None else self.text(key)

    def number(self, key: str) -> int:
        value: int = self._get(key, int, "a number")
        return value

    def number_or_none(self, key: str) -> int | None:
        return None if self.data.get(key) is None else self.number(key)

    def flag(self, key: str) -> bool:
        value: bool = self._get(key, bool, "true or false")
        return value

    def part(self, key: str) -> Answer:
        return Answer(self._get(key, dict, "an object"), self.what)

    def part_or_none(self, key: str) -> Answer | None:
        return None if self.data.get(key) is None else self.part(key)

    def parts(self, key: str) -> list[Answer]:
        items = self._get(key, list, "a list")
        if not all(isinstance(item, dict) for item in items):
            raise shape_error(self.what, f"a list of objects {key!r}")
        return [Answer(item, self.what) for item in items]

    def author(self, key: str = "user") -> str:
        """The login of the account in `key`: GitHub answers `null` for a deleted one."""
        who = self.part_or_none(key)
        return GHOST if who is None else who.text("login")

    def time(self, key: str) -> datetime:
        text = self.text(key)
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
        except ValueError:
            raise shape_error(self.what, f"a time {key!r}") from None


@attrs.frozen
class Page:
    data: Any
    next_url: str | None


class Wire:
    """The HTTP side of one GitHub API, for one token."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str,
        timeout: float = 30.0,
        seconds_between_writes: float = SECONDS_BETWEEN_WRITES,
        waited: Waited | None = None,
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.waited = waited
        self.max_wait_s = max_wait_s
        self._seconds_between_writes = seconds_between_writes
        self._last_write = -float("inf")
        self._lock = threading.Lock()
        self._token = token
        self._http = httpx2.Client(
            headers=gidgethub.sansio.create_headers(REQUESTER, oauth_token=token),
            timeout=timeout,
            follow_redirects=True,  # a renamed repository answers with a redirect
        )
        self._plain: httpx2.Client | None = None

    @property
    def graphql_url(self) -> str:
        """github.com's GraphQL sits beside its REST root; GitHub Enterprise's REST root ends
        in /api/v3 and its GraphQL is /api/graphql."""
        if self.api_url.endswith("/api/v3"):
            return self.api_url.removesuffix("/v3") + "/graphql"
        return self.api_url + "/graphql"

    def close(self) -> None:
        self._http.close()
        if self._plain is not None:
            self._plain.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- JSON calls

    def call(self, what: str, method: str, path: str, **sent: Unpack[Sent]) -> Answer:
        data = self.call_raw(what, method, path, **sent)
        if not isinstance(data, dict):
            raise shape_error(what, "an object")
        return Answer(data, what)

    def call_raw(self, what: str, method: str, path: str, **sent: Unpack[Sent]) -> Any:
        out = Outgoing(what, method, self.api_url + path, sent.get("params"), sent.get("body"))
        return self._page(out).data

    def pages(
        self,
        what: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        key: str | None = None,
        max_pages: int = MAX_PAGES,
    ) -> tuple[list[Answer], bool]:
        """Every item of a list, through every page (`key`: the list inside each page's
        object, as check runs are given); True beside them when the list was cut."""
        found: list[Answer] = []
        url: str | None = self.api_url + path
        query: Mapping[str, str] | None = {**(params or {}), "per_page": str(PER_PAGE)}
        for _ in range(max_pages):
            assert url is not None
            page = self._page(Outgoing(what, "GET", url, query))
            items = (
                page.data.get(key) if key is not None and isinstance(page.data, dict) else page.data
            )
            if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
                raise shape_error(what, "a list of objects")
            found.extend(Answer(item, what) for item in items)
            url, query = page.next_url, None  # the next link keeps the query
            if url is None:
                return found, False
            self._same_api(what, url)
        return found, True

    def graphql(self, what: str, query: str, variables: Mapping[str, object]) -> Answer:
        """The `data` of a GraphQL query; GitHub answers errors with 200 and an `errors` list."""
        body = {"query": query, "variables": dict(variables)}
        page = self._page(Outgoing(what, "POST", self.graphql_url, body=body))
        if not isinstance(page.data, dict):
            raise shape_error(what, "an object")
        errors = page.data.get("errors")
        if errors:
            first = errors[0] if isinstance(errors, list) and errors else errors
            message = first.get("message") if isinstance(first, dict) else first
            raise ShadowcloneError(f"GitHub's GraphQL refused to {what}: {_one_line(str(message))}")
        data = page.data.get("data")
        if not isinstance(data, dict):
            raise shape_error(what, "GraphQL 'data'")
        return Answer(data, what)

    # ------------------------------------------------------------------------- downloads

    def download(
        self, what: str, url: str, *, max_bytes: int, tail: bool = False
    ) -> tuple[bytes, bool]:
        """The bytes at `url`: at most `max_bytes`, its first or (`tail`) its last, and True
        beside them when there were more. The token goes
        only to this GitHub's own hosts; a redirect elsewhere (GitHub sends logs and assets to
        signed storage URLs) is followed without it."""
        for _ in range(5):
            client = self._http if self._same_site(url) else self._plain_client()
            with self._lock:
                try:
                    with client.stream("GET", url, follow_redirects=False) as response:
                        if response.is_redirect and "location" in response.headers:
                            url = urllib.parse.urljoin(url, response.headers["location"])
                            continue
                        if response.status_code != 200:
                            raise ShadowcloneError(
                                f"GitHub answered {response.status_code} to {what}"
                            )
                        kept = bytearray()
                        cut = False
                        for chunk in response.iter_bytes():
                            kept += chunk
                            if len(kept) > max_bytes:
                                cut = True
                                if not tail:
                                    return bytes(kept[:max_bytes]), True
                                del kept[: len(kept) - max_bytes]
                        return bytes(kept), cut
                except httpx2.HTTPError as error:
                    raise ShadowcloneError(
                        f"GitHub cannot be reached to {what}: "
                        f"{_one_line(str(error)) or type(error).__name__}"
                    ) from error
        raise ShadowcloneError(f"GitHub redirected too often to {what}")

    def _same_site(self, url: str) -> bool:
        """Whether `url` is on this GitHub's web host: github.com for api.github.com, the
        Enterprise host itself for its /api/v3."""
        api = urllib.parse.urlsplit(self.api_url)
        there = urllib.parse.urlsplit(url)
        if there.scheme != api.scheme:
            return False
        return there.netloc == api.netloc or "api." + there.netloc == api.netloc

    def on_github(self, url: str) -> bool:
        """Whether `url` is on this GitHub's hosts: its API, its web site, or (for github.com)
        the hosts it keeps pasted files on."""
        if self._same_site(url):
            return True
        host = urllib.parse.urlsplit(url).hostname or ""
        github_com = urllib.parse.urlsplit(self.api_url).hostname == "api.github.com"
        return github_com and host.endswith(".githubusercontent.com")

    def _plain_client(self) -> httpx2.Client:
        if self._plain is None:
            self._plain = httpx2.Client(headers={"user-agent": REQUESTER}, timeout=30.0)
        return self._plain

    # ------------------------------------------------------------------------- the wire

    def _same_api(self, what: str, url: str) -> None:
        if not url.startswith(self.api_url + "/"):
            raise ShadowcloneError(f"GitHub's next page to {what} is elsewhere: {url}")

    def _page(self, out: Outgoing) -> Page:
        response = self._send_past_rate_limits(out)
        try:
            data, _, more = gidgethub.sansio.decipher_response(
                response.status_code, response.headers, response.content
            )
        except gidgethub.HTTPException as error:
            raise http_error(out.what, error) from error
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ShadowcloneError(
                f"GitHub answered {response.status_code} to {out.what} with a body it cannot "
                f"be read from ({type(error).__name__})"
            ) from error
        return Page(data, more)

    def _send_past_rate_limits(self, out: Outgoing) -> httpx2.Response:
        """The answer to one request, sent again after each rate-limit refusal once its wait
        is over, while the waits stay within bounds."""
        waited_s = 0.0
        for attempt in range(RATE_LIMIT_TRIES + 1):
            response = self._send(out)
            wait = rate_limit_wait(response.status_code, response.headers, data_of(response))
            if wait is None:
                return response
            asked, why = wait
            seconds = SECONDARY_WAIT_S * 2**attempt if asked is None else asked
            if attempt == RATE_LIMIT_TRIES or waited_s + seconds > self.max_wait_s:
                raise Refused(
                    f"GitHub's {why} to {out.what} asks a wait of {seconds:.0f} s, past what a "
                    f"clone waits ({self.max_wait_s:.0f} s in all, {RATE_LIMIT_TRIES} waits)"
                )
            if self.waited is not None:
                self.waited(seconds, why)
            with self._lock:  # one request at a time: nobody else goes meanwhile
                time.sleep(seconds)
            waited_s += seconds
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _send(self, out: Outgoing) -> httpx2.Response:
        with self._lock:
            if out.method != "GET":
                pause = self._last_write + self._seconds_between_writes - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            try:
                return self._http.request(
                    out.method,
                    out.url,
                    params=out.params,
                    content=None if out.body is None else json.dumps(out.body).encode(),
                    headers=None if out.body is None else {"content-type": "application/json"},
                )
            except httpx2.HTTPError as error:
                raise ShadowcloneError(
                    f"GitHub at {self.api_url} cannot be reached to {out.what}: "
                    f"{_one_line(str(error)) or type(error).__name__}"
                ) from error
            finally:
                if out.method != "GET":
                    self._last_write = time.monotonic()


def data_of(response: httpx2.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def rate_limit_wait(
    status: int, headers: Mapping[str, str], data: object, *, clock: Callable[[], float] = time.time
) -> tuple[float | None, str] | None:
    """How long GitHub asks to wait before this request is sent again, and which limit it is;
    None when the answer is no rate limit. A `retry-after` (seconds or an HTTP date) wins; a
    primary limit (`x-ratelimit-remaining: 0`) lasts until `x-ratelimit-reset`; a secondary
    limit that names no wait gives None for it (the caller chooses)."""
    if status not in (403, 429):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    secondary = isinstance(message, str) and "secondary rate limit" in message.lower()
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        seconds = retry_after_s(retry_after, clock)
        if seconds is not None:
            kind = "secondary rate limit" if secondary or status == 429 else "rate limit"
            return seconds, kind
    if headers.get("x-ratelimit-remaining") == "0":
        try:
            reset = float(headers.get("x-ratelimit-reset", ""))
        except ValueError:
            reset = math.nan
        if not 0 <= reset < clock() + 1e7:  # no time a clone can wait for
            reset = clock() + SECONDARY_WAIT_S
        when = datetime.fromtimestamp(reset, UTC).strftime("%H:%M:%S UTC")
        return max(0.0, reset - clock()), f"primary rate limit (it resets at {when})"
    if secondary or status == 429:
        return None, "secondary rate limit"
    return None


def segment(text: str) -> str:
    """One path segment: nothing in a name can reach another endpoint."""
    return urllib.parse.quote(text, safe="")


def repo_path(full_name: str) -> str:
    owner, _, name = full_name.partition("/")
    return f"/repos/{segment(owner)}/{segment(name)}"


def shape_error(what: str, expected: str) -> ShadowcloneError:
    return ShadowcloneError(f"GitHub's answer to {what} holds no {expected}")


def http_error(what: str, error: gidgethub.HTTPException) -> ShadowcloneError:
    message = error.args[0] if error.args and isinstance(error.args[0], str) else ""
    if not message and len(error.args) > 1 and isinstance(error.args[1], str):
        message = error.args[1]
    reason = _one_line(f"{int(error.status_code)} {message or error.status_code.phrase}")
    if error.status_code == 401:
        return Refused(f"GitHub refused the token ({reason}) to {what}; check the GitHub token")
    if error.status_code == 404:
        return BadInput(
            f"GitHub cannot {what}: {reason} (it does not exist, or the token cannot see it)"
        )
    if error.status_code in (403, 422):
        return Refused(f"GitHub refused to {what}: {reason}")
    return ShadowcloneError(f"GitHub failed to {what}: {reason}")


def _one_line(text: str) -> str:
    return " ".join(text.split())
