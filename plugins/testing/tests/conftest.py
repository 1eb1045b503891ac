"""The fake GitHub's tests: a world around one pull request, and plain HTTP requests to it
(what the tests of the fake GitHub share; tests may not import one another)."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import attrs
import pytest
from shadowclone_testing.fakes.github import FakeGitHub

ORIGINAL = "".join(f"line {n}\n" for n in range(1, 41))
CHANGED = ORIGINAL.replace("line 20\n", "line twenty\nline twenty-one\n")


@attrs.frozen
class Answer:
    status: int
    body: Any
    headers: dict[str, str]
    """Header names in lower case."""


@attrs.frozen
class World:
    gh: FakeGitHub
    owner: str
    mate: str
    stranger: str
    pull: int
    repo: str = "octo/app"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """An owner, a collaborator who opened a pull request changing line 20 of app.py, and a
    stranger, around one private repository."""
    with FakeGitHub(tmp_path / "github") as gh:
        owner = gh.add_user("octo")
        mate = gh.add_user("mate")
        stranger = gh.add_user("stranger")
        gh.create_repo("octo/app", files={"app.py": ORIGINAL})
        gh.grant("octo/app", "mate", "write")
        pull = gh.create_pull_request(
            "octo/app",
            author="mate",
            branch="mate/twenty",
            title="Twenty",
            files={"app.py": CHANGED},
        )
        yield World(gh, owner, mate, stranger, pull)


def _call(
    gh: FakeGitHub, method: str, target: str, *, token: str | None = None, body: object = None
) -> Answer:
    """One HTTP request to `target`: a path or an absolute URL on the fake."""
    parsed = urllib.parse.urlsplit(target)
    path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
    connection = http.client.HTTPConnection("127.0.0.1", gh.port, timeout=30)
    try:
        headers = {"Authorization": f"token {token}"} if token else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection.request(
            method, path, body=None if body is None else json.dumps(body), headers=headers
        )
        response = connection.getresponse()
        raw = response.read()
        content_type = response.getheader("Content-Type", "")
        payload: Any = json.loads(raw) if "json" in content_type else raw
        return Answer(response.status, payload, {k.lower(): v for k, v in response.getheaders()})
    finally:
        connection.close()


def _links(answer: Answer) -> dict[str, str]:
    return {
        rel: url
        for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', answer.headers.get("link", ""))
    }


def _graphql(gh: FakeGitHub, token: str, query: str, **variables: Any) -> Any:
    answer = _call(
        gh, "POST", "/api/graphql", token=token, body={"query": query, "variables": variables}
    )
    assert answer.status == 200
    return answer.body


class Call(Protocol):
    def __call__(
        self,
        gh: FakeGitHub,
        method: str,
        target: str,
        *,
        token: str | None = None,
        body: object = None,
    ) -> Answer: ...


class Links(Protocol):
    def __call__(self, answer: Answer) -> dict[str, str]: ...


class Graphql(Protocol):
    def __call__(self, gh: FakeGitHub, token: str, query: str, **variables: Any) -> Any: ...


@pytest.fixture
def call() -> Call:
    """One HTTP request to a path or an absolute URL on the fake, as `Answer`."""
    return _call


@pytest.fixture
def links() -> Links:
    """The `Link` header of an answer, by relation."""
    return _links


@pytest.fixture
def graphql() -> Graphql:
    """One GraphQL query's answer, which must come with status 200."""
    return _graphql
