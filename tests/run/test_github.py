"""The clone's GitHub client against the fake GitHub: the facts it reads, the pull requests it
opens and updates, its comments, the requests it makes and the one-line errors it raises."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.errors import BadInput, Refused, ShadowcloneError
from shadowclone.run.github import GithubClient, User, link_issue
from shadowclone_testing.fakes.github import FakeGitHub

REPO = "octo/app"


@pytest.fixture
def gh(tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(tmp_path / "github") as gh:
        gh.add_user("octo", name="Octo Cat", email="octo@example.com", token="ghp_octo")
        gh.add_user("mate", token="ghp_mate")
        gh.add_user("reader", token="ghp_reader")
        gh.add_user("stranger", token="ghp_stranger")
        gh.create_repo(REPO, files={"app.py": "print('app')\n"}, default_branch="trunk")
        gh.grant(REPO, "mate", "write")
        gh.grant(REPO, "reader", "read")
        yield gh


def client(gh: FakeGitHub, token: str = "ghp_octo") -> GithubClient:
    return GithubClient(token, api_url=gh.api_url, seconds_between_writes=0)


def test_facts_about_the_token_user_and_the_repository(gh: FakeGitHub) -> None:
    with client(gh) as github:
        assert github.token_user() == User(login="octo", name="Octo Cat", email="octo@example.com")
        repo = github.repository(REPO)
    assert repo.full_name == REPO
    assert (repo.private, repo.visibility, repo.default_branch) == (True, "private", "trunk")
    assert (repo.permission, repo.can_push) == ("admin", True)
    assert repo.clone_url == gh.clone_url(REPO)

    expected = {"ghp_mate": ("write", True), "ghp_reader": ("read", False)}
    for token, (permission, can_push) in expected.items():
        seen = client(gh, token).repository(REPO)
        assert (seen.permission, seen.can_push) == (permission, can_push)

    gh.set_visibility(REPO, private=False)
    public = client(gh, "ghp_stranger").repository(REPO)
    assert (public.private, public.visibility, public.permission) == (False, "public", "read")


def test_contents_of_a_file_a_folder_and_nothing(gh: FakeGitHub) -> None:
    gh.commit(
        REPO, "trunk", {"tools/run.sh": "echo run\n", "tools/deep/x.bin": "\x00\x01"}, author="octo"
    )
    with client(gh) as github:
        assert github.contents(REPO, "app.py") == b"print('app')\n"
        assert github.contents(REPO, "tools/deep/x.bin") == b"\x00\x01"
        listed = github.contents(REPO, "tools")
        assert isinstance(listed, list)
        assert sorted((e.path, e.kind) for e in listed) == [
            ("tools/deep", "dir"),
            ("tools/run.sh", "file"),
        ]
        assert github.contents(REPO, "missing.txt") is None
        assert github.contents(REPO, "app.py", ref="no-such-branch") is None
        assert client(gh, "ghp_stranger").contents(REPO, "app.py") is None  # private: unseen


def test_issue_and_pull_request(gh: FakeGitHub) -> None:
    issue_number = gh.create_issue(REPO, author="octo", title="Fix the app", body="It breaks.")
    own = gh.create_pull_request(
        REPO, author="octo", branch="octo/fix", title="Fix", body="Closes #1", base="trunk"
    )
    foreign = gh.create_pull_request(
        REPO, author="stranger", branch="patch-1", title="Drive-by", fork=True
    )
    github = client(gh)

    issue = github.issue(REPO, issue_number)
    assert (issue.number, issue.title, issue.body) == (1, "Fix the app", "It breaks.")
    assert (issue.author, issue.state, issue.is_pull_request) == ("octo", "open", False)
    assert issue.html_url == f"{gh.url}/{REPO}/issues/1"
    assert github.issue(REPO, own).is_pull_request is True

    pull = github.pull_request(REPO, own)
    assert (pull.head_branch, pull.head_repo, pull.base_branch) == ("octo/fix", REPO, "trunk")
    assert (pull.author, pull.state, pull.body) == ("octo", "open", "Closes #1")
    assert pull.html_url == f"{gh.url}/{REPO}/pull/{own}"
    assert pull.head_sha == gh.branch_sha(REPO, "octo/fix")
    assert pull.from_fork is False

    stranger = github.pull_request(REPO, foreign)
    assert (stranger.head_repo, stranger.author, stranger.from_fork) == (
        "stranger/app",
        "stranger",
        True,
    )


def test_open_find_and_update_a_pull_request(gh: FakeGitHub) -> None:
    gh.create_issue(REPO, author="octo", title="Fix the app")
    github = client(gh, "ghp_mate")
    assert github.find_open_pull_request(REPO, "shadowclone/1-fix-the-app") is None

    gh.create_pull_request(REPO, author="mate", branch="unrelated", title="Other", base="trunk")
    gh.edit_pull_request(REPO, 2, state="closed")
    branch = "shadowclone/1-fix-the-app"
    with pytest.raises(Refused, match="GitHub refused to open a pull request"):
        github.open_pull_request(REPO, title="Fix", body="Done.", head=branch, base="trunk")

    # The clone's branch, pushed as a clone would; the admin API stands in for the push here.

    gh.commit(REPO, branch, {"app.py": "print('fixed')\n"}, author="mate")
    opened = github.open_pull_request(
        REPO, title="Fix the app", body="Done.", head=branch, base="trunk", closes=1
    )
    assert opened.body == "Done.\n\nCloses #1"
    assert (opened.head_branch, opened.base_branch, opened.author) == (branch, "trunk", "mate")
    assert gh.issue(REPO, opened.number).body == "Done.\n\nCloses #1"

    found = github.find_open_pull_request(REPO, branch)
    assert found == opened
    assert github.find_open_pull_request(REPO, "unrelated") is None  # closed

    with pytest.raises(Refused) as again:
        github.open_pull_request(REPO, title="Fix", body="", head=branch, base="trunk")
    assert "A pull request already exists for octo:shadowclone/1-fix-the-app." in str(again.value)

    updated = github.update_pull_request_body(REPO, opened.number, "Report: done.", closes=1)
    assert updated.body == "Report: done.\n\nCloses #1"
    assert gh.issue(REPO, opened.number).body == "Report: done.\n\nCloses #1"


def test_comment_is_one_write_and_nothing_else(gh: FakeGitHub) -> None:
    number = gh.create_issue(REPO, author="octo", title="Question")
    before = len(gh.requests())
    comment = client(gh, "ghp_mate").comment(REPO, number, "The clone's report")
    made = gh.requests()[before:]
    assert [(r.method, r.path, r.user) for r in made] == [
        ("POST", f"/api/v3/repos/{REPO}/issues/{number}/comments", "mate")
    ]
    assert (comment.author, comment.body) == ("mate", "The clone's report")
    assert [(c.id, c.author, c.body) for c in gh.comments(REPO, number)] == [
        (comment.id, "mate", "The clone's report")
    ]
    assert comment.html_url.endswith(f"/{REPO}/issues/{number}#issuecomment-{comment.id}")


def test_reads_make_no_writes(gh: FakeGitHub) -> None:
    number = gh.create_issue(REPO, author="octo", title="Read me")
    github = client(gh)
    github.token_user()
    github.repository(REPO)
    github.issue(REPO, number)
    github.find_open_pull_request(REPO, "nothing")
    assert gh.requests()
    assert not any(r.is_write for r in gh.requests())


ERRORS = [
    pytest.param(
        "ghp_octo",
        lambda github: github.repository("octo/missing"),
        BadInput,
        "GitHub cannot read the repository octo/missing: 404 Not Found",
        id="no such repository",
    ),
    pytest.param(
        "ghp_octo",
        lambda github: github.issue(REPO, 7),
        BadInput,
        "GitHub cannot read issue octo/app#7: 404 Not Found",
        id="no such issue",
    ),
    pytest.param(
        "ghp_stranger",
        lambda github: github.repository(REPO),
        BadInput,
        "(it does not exist, or the token cannot see it)",
        id="private repository",
    ),
    pytest.param(
        "ghp_nope",
        lambda github: github.token_user(),
        Refused,
        "GitHub refused the token (401 Bad credentials) to read the token's user",
        id="wrong token",
    ),
    pytest.param(
        "ghp_reader",
        lambda github: (
            github.comment(REPO, 1, "hi") and github.update_pull_request_body(REPO, 2, "x")
        ),
        Refused,
        "GitHub refused to update pull request octo/app#2: 403",
        id="not allowed",
    ),
]


@pytest.mark.parametrize(("token", "call", "expected", "needle"), ERRORS)
def test_errors_are_one_line_shadowclone_errors(
    gh: FakeGitHub,
    token: str,
    call: Callable[[GithubClient], object],
    expected: type[ShadowcloneError],
    needle: str,
) -> None:
    gh.create_issue(REPO, author="octo", title="Issue")
    gh.create_pull_request(REPO, author="mate", branch="mate/pr", title="PR", base="trunk")
    with pytest.raises(ShadowcloneError) as raised:
        call(client(gh, token))
    assert type(raised.value) is expected
    assert needle in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_unreachable_github_is_one_line(gh: FakeGitHub) -> None:
    github = client(gh)
    github.token_user()  # leaves a keep-alive connection open
    gh.stop()
    with pytest.raises(ShadowcloneError) as raised:
        github.repository(REPO)
    assert str(raised.value).startswith(f"GitHub at {github.api_url} cannot be reached")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("body", "linked"),
    [
        ("Done.", "Done.\n\nCloses #3"),
        ("", "Closes #3"),
        ("Fixes #3 by adding a test.", "Fixes #3 by adding a test."),
        ("resolved #3", "resolved #3"),
        ("Closes #30", "Closes #30\n\nCloses #3"),
        ("See #3.", "See #3.\n\nCloses #3"),
    ],
)
def test_link_issue(body: str, linked: str) -> None:
    assert link_issue(body, 3) == linked


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status and body the test put on the server."""

    def do_GET(self) -> None:
        status, body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PATCH = do_GET

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def scripted() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = ["login", "name", "title", "body", "user", "number", "head", "base", "permissions"]
ANSWERS = st.one_of(
    JSON.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6).map(
        lambda value: json.dumps(value).encode()
    ),
    st.binary(max_size=40),
)
CALLS: list[Callable[[GithubClient], object]] = [
    lambda github: github.token_user(),
    lambda github: github.repository(REPO),
    lambda github: github.issue(REPO, 1),
    lambda github: github.pull_request(REPO, 1),
    lambda github: github.find_open_pull_request(REPO, "branch"),
    lambda github: github.open_pull_request(REPO, title="t", body="b", head="h", base="main"),
    lambda github: github.comment(REPO, 1, "hi"),
]


@settings(max_examples=150, deadline=None)
@given(
    status=st.sampled_from([200, 201, 204, 301, 304, 400, 401, 403, 404, 409, 422, 500, 502]),
    body=ANSWERS,
    call=st.sampled_from(CALLS),
)
def test_any_answer_is_a_value_or_one_line(
    scripted: http.server.ThreadingHTTPServer,
    status: int,
    body: bytes,
    call: Callable[[GithubClient], object],
) -> None:
    """Whatever a GitHub answers (any status, any body, any shape), a call returns its value
    object or raises one ShadowcloneError line: never another exception."""
    scripted.answer = (status, body)  # type: ignore[attr-defined]
    host, port = scripted.server_address[:2]
    with GithubClient(
        "ghp_x", api_url=f"http://{host!s}:{port}", seconds_between_writes=0
    ) as github:
        try:
            call(github)
        except ShadowcloneError as error:
            assert "\n" not in str(error)
            assert str(error)
