"""The fake GitHub's conversation of an issue or pull request over real HTTP: pagination with
`Link` headers, comments and their edits, deleted users, reviews and their refusals, review
threads over REST and GraphQL, check runs with logs, pasted images and rate limits."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone_testing.fakes.github import Annotation, FakeGitHub, openapi
from shadowclone_testing.fakes.github.paging import paginate

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


def call(
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


def links(answer: Answer) -> dict[str, str]:
    return {
        rel: url
        for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', answer.headers.get("link", ""))
    }


def graphql(gh: FakeGitHub, token: str, query: str, **variables: Any) -> Any:
    answer = call(
        gh, "POST", "/api/graphql", token=token, body={"query": query, "variables": variables}
    )
    assert answer.status == 200
    return answer.body


# ----------------------------------------------------------------------------- pagination


def test_comments_come_in_pages_linked_as_github_links_them(world: World) -> None:
    gh = world.gh
    for n in range(100):
        gh.add_comment(
            world.repo,
            world.pull,
            author="octo",
            body=f"c{n}",
            created_at=f"2024-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
        )
    base = f"{gh.api_url}/repos/octo/app/issues/{world.pull}/comments"

    first = call(gh, "GET", f"{base}?since=2023-01-01T00:00:00Z", token=world.mate)
    assert first.status == 200
    assert len(first.body) == 30
    assert set(links(first)) == {"next", "last"}
    assert links(first)["last"] == f"{base}?since=2023-01-01T00%3A00%3A00Z&page=4"

    second = call(gh, "GET", links(first)["next"], token=world.mate)
    assert list(links(second)) == ["prev", "next", "last", "first"]
    assert "since=2023-01-01T00%3A00%3A00Z" in links(second)["first"]

    bodies = []
    page: Answer | None = first
    pages = 0
    while page is not None:
        pages += 1
        bodies += [c["body"] for c in page.body]
        following = links(page).get("next")
        page = call(gh, "GET", following, token=world.mate) if following else None
    assert pages == 4
    assert bodies == [f"c{n}" for n in range(100)]

    last = call(gh, "GET", f"{base}?page=4", token=world.mate)
    assert (len(last.body), set(links(last))) == (10, {"prev", "first"})
    single = call(gh, "GET", f"{base}?per_page=100", token=world.mate)
    assert (len(single.body), "link" in single.headers) == (100, False)
    capped = call(gh, "GET", f"{base}?per_page=500", token=world.mate)
    assert len(capped.body) == 100


@given(count=st.integers(0, 250), per_page=st.integers(-1, 150))
def test_pages_followed_by_their_links_give_every_item_once_in_order(
    count: int, per_page: int
) -> None:
    url = "http://fake/api/v3/things"
    query = {"per_page": str(per_page), "state": "all"}
    items = list(range(count))
    seen: list[int] = []
    while True:
        chunk, link = paginate(items, url=url, query=query)
        seen += chunk
        nexts = re.findall(r'<([^>]+)>; rel="next"', link or "")
        if not nexts:
            break
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(nexts[0]).query))
        assert query["state"] == "all"
    assert seen == items


def test_pages_over_http_for_any_page_size(world: World) -> None:
    gh = world.gh
    for n in range(23):
        gh.add_comment(world.repo, world.pull, author="mate", body=f"c{n}")
    base = f"/api/v3/repos/octo/app/issues/{world.pull}/comments"

    @settings(max_examples=15, deadline=None)
    @given(per_page=st.integers(1, 30))
    def pages(per_page: int) -> None:
        bodies: list[str] = []
        target: str | None = f"{base}?per_page={per_page}"
        while target is not None:
            page = call(gh, "GET", target, token=world.owner)
            bodies += [c["body"] for c in page.body]
            target = links(page).get("next")
        assert bodies == [f"c{n}" for n in range(23)]

    pages()


# ----------------------------------------------------------------------------- comments, users


def test_comments_since_a_time_and_edited_ones(world: World) -> None:
    gh = world.gh
    old = gh.add_comment(
        world.repo, world.pull, author="octo", body="old", created_at="2024-01-01T00:00:00Z"
    )
    gh.add_comment(
        world.repo, world.pull, author="octo", body="new", created_at="2024-03-01T00:00:00Z"
    )
    base = f"/api/v3/repos/octo/app/issues/{world.pull}/comments"
    since = call(gh, "GET", f"{base}?since=2024-02-01T00:00:00Z", token=world.owner)
    assert [c["body"] for c in since.body] == ["new"]

    gh.edit_comment(world.repo, old.id, body="old, edited", updated_at="2024-04-01T00:00:00Z")
    since = call(gh, "GET", f"{base}?since=2024-02-01T00:00:00Z", token=world.owner)
    assert [(c["body"], c["created_at"], c["updated_at"]) for c in since.body] == [
        ("old, edited", "2024-01-01T00:00:00Z", "2024-04-01T00:00:00Z"),
        ("new", "2024-03-01T00:00:00Z", "2024-03-01T00:00:00Z"),
    ]
    assert call(gh, "GET", f"{base}?since=yesterday", token=world.owner).status == 422
    # A wrong request on purpose: GitHub's description says so too, when it is there to check.
    wrong = "GET /repos/{owner}/{repo}/issues/{issue_number}/comments: request: query since: "
    expected = [wrong + "'yesterday' is not a 'date-time'"] if openapi.find_description() else []
    assert gh.take_openapi_violations() == expected


def test_a_deleted_user_is_nobody_in_every_payload(world: World) -> None:
    gh = world.gh
    gh.add_comment(world.repo, world.pull, author="mate", body="hello")
    gh.add_review(world.repo, world.pull, author="mate", state="COMMENTED", body="looks odd")
    comment = gh.add_review_comment(
        world.repo, world.pull, author="mate", path="app.py", line=20, body="here"
    )
    gh.delete_user("mate")

    api = f"/api/v3/repos/octo/app/issues/{world.pull}"
    pulls = f"/api/v3/repos/octo/app/pulls/{world.pull}"
    assert call(gh, "GET", api, token=world.owner).body["user"] is None
    # A pull request's author is never null in GitHub's description: the ghost account stands in.
    assert call(gh, "GET", pulls, token=world.owner).body["user"]["login"] == "ghost"
    assert [c["user"] for c in call(gh, "GET", f"{api}/comments", token=world.owner).body] == [None]
    assert {
        r["user"] is None for r in call(gh, "GET", f"{pulls}/reviews", token=world.owner).body
    } == {True}
    assert [c["user"] for c in call(gh, "GET", f"{pulls}/comments", token=world.owner).body] == [
        None
    ]

    refused = call(gh, "GET", "/api/v3/user", token=world.mate)
    assert (refused.status, refused.body["message"]) == (401, "Bad credentials")
    assert call(gh, "GET", "/api/v3/users/octo", token=world.owner).status == 200

    data = graphql(gh, world.owner, THREADS, number=world.pull)["data"]
    thread = data["repository"]["pullRequest"]["reviewThreads"]["nodes"][0]
    assert thread["comments"]["nodes"][0]["databaseId"] == comment
    assert thread["comments"]["nodes"][0]["author"] is None


# ----------------------------------------------------------------------------- reviews


def test_a_review_with_a_comment_outside_the_diff_creates_nothing(world: World) -> None:
    gh = world.gh
    target = f"/api/v3/repos/octo/app/pulls/{world.pull}/reviews"
    refused = call(
        gh,
        "POST",
        target,
        token=world.owner,
        body={
            "event": "COMMENT",
            "body": "Two notes",
            "comments": [
                {"path": "app.py", "line": 21, "body": "inside the diff"},
                {"path": "app.py", "line": 2, "body": "far from any change"},
            ],
        },
    )
    assert refused.status == 422
    assert refused.body["message"] == "Unprocessable Entity"
    assert refused.body["errors"] == ["Line could not be resolved"]
    assert gh.issue(world.repo, world.pull).reviews == ()
    assert gh.issue(world.repo, world.pull).review_comments == ()
    assert call(gh, "GET", target, token=world.owner).body == []

    own = call(gh, "POST", target, token=world.mate, body={"event": "APPROVE"})
    assert (own.status, own.body["errors"]) == (422, ["Can not approve your own pull request"])
    backwards = call(
        gh,
        "POST",
        target,
        token=world.owner,
        body={
            "event": "COMMENT",
            "comments": [{"path": "app.py", "start_line": 22, "line": 21, "body": "x"}],
        },
    )
    assert backwards.status == 422
    blank = call(gh, "POST", target, token=world.owner, body={"event": "REQUEST_CHANGES"})
    assert blank.status == 422
    assert gh.issue(world.repo, world.pull).reviews == ()


def test_a_review_with_comments_shows_in_reviews_comments_and_threads(world: World) -> None:
    gh = world.gh
    head = gh.branch_sha(world.repo, "mate/twenty")
    created = call(
        gh,
        "POST",
        f"/api/v3/repos/octo/app/pulls/{world.pull}/reviews",
        token=world.owner,
        body={
            "commit_id": head,
            "event": "REQUEST_CHANGES",
            "body": "Please rename",
            "comments": [
                {"path": "app.py", "start_line": 20, "line": 21, "body": "One name for both"},
                {"path": "app.py", "line": 20, "side": "LEFT", "body": "Was fine"},
                {"path": "app.py", "position": 1, "body": "By position"},
            ],
        },
    )
    assert created.status == 200
    review = created.body
    assert (review["state"], review["body"], review["commit_id"]) == (
        "CHANGES_REQUESTED",
        "Please rename",
        head,
    )
    assert review["user"]["login"] == "octo"
    assert review["submitted_at"]

    reviews = call(
        gh, "GET", f"/api/v3/repos/octo/app/pulls/{world.pull}/reviews", token=world.mate
    )
    assert [r["id"] for r in reviews.body] == [review["id"]]
    comments = call(
        gh, "GET", f"/api/v3/repos/octo/app/pulls/{world.pull}/comments", token=world.mate
    ).body
    assert [(c["line"], c["start_line"], c["side"], c["body"]) for c in comments] == [
        (21, 20, "RIGHT", "One name for both"),
        (20, None, "LEFT", "Was fine"),
        (17, None, "RIGHT", "By position"),
    ]
    first = comments[0]
    assert first["pull_request_review_id"] == review["id"]
    assert first["diff_hunk"].startswith("@@ -17,7 +17,8 @@")
    assert first["diff_hunk"].endswith("+line twenty-one")
    assert (first["commit_id"], first["original_commit_id"], first["original_line"]) == (
        head,
        head,
        21,
    )
    assert first["html_url"].endswith(f"/octo/app/pull/{world.pull}#discussion_r{first['id']}")
    assert "in_reply_to_id" not in first

    pending = call(
        gh,
        "POST",
        f"/api/v3/repos/octo/app/pulls/{world.pull}/reviews",
        token=world.stranger,
        body={"body": "draft"},
    )
    assert pending.status == 404  # a stranger cannot see the private repository
    gh.grant(world.repo, "stranger", "read")
    pending = call(
        gh,
        "POST",
        f"/api/v3/repos/octo/app/pulls/{world.pull}/reviews",
        token=world.stranger,
        body={},
    )
    assert (pending.status, pending.body["state"], "submitted_at" in pending.body) == (
        200,
        "PENDING",
        False,
    )
    shown = call(gh, "GET", f"/api/v3/repos/octo/app/pulls/{world.pull}/reviews", token=world.owner)
    assert [r["state"] for r in shown.body] == ["CHANGES_REQUESTED"]


def test_replies_join_the_thread_of_their_root(world: World) -> None:
    gh = world.gh
    root = gh.add_review_comment(
        world.repo, world.pull, author="octo", path="app.py", line=21, body="Why?"
    )
    base = f"/api/v3/repos/octo/app/pulls/{world.pull}/comments"
    first = call(gh, "POST", f"{base}/{root}/replies", token=world.mate, body={"body": "Because"})
    assert first.status == 201
    assert (first.body["in_reply_to_id"], first.body["line"], first.body["path"]) == (
        root,
        21,
        "app.py",
    )
    second = call(
        gh, "POST", f"{base}/{first.body['id']}/replies", token=world.owner, body={"body": "OK"}
    )
    assert second.status == 201
    assert second.body["in_reply_to_id"] == root

    other = gh.create_pull_request(
        world.repo, author="mate", branch="other", title="Other", files={"b.txt": "b\n"}
    )
    elsewhere = call(
        gh,
        "POST",
        f"/api/v3/repos/octo/app/pulls/{other}/comments/{root}/replies",
        token=world.mate,
        body={"body": "?"},
    )
    assert elsewhere.status == 404

    listed = call(gh, "GET", base, token=world.owner).body
    assert [(c["body"], c.get("in_reply_to_id")) for c in listed] == [
        ("Why?", None),
        ("Because", root),
        ("OK", root),
    ]
    with pytest.raises(ValueError, match="not in the diff"):
        gh.add_review_comment(
            world.repo, world.pull, author="octo", path="app.py", line=2, body="no"
        )


# ----------------------------------------------------------------------------- GraphQL

THREADS = """
query($number: Int!, $after: String) {
  repository(owner: "octo", name: "app") {
    pullRequest(number: $number) {
      reviewThreads(first: 2, after: $after) {
        totalCount
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line startLine originalLine diffSide
          comments(first: 10) {
            totalCount
            pageInfo { hasNextPage endCursor }
            nodes {
              id databaseId body createdAt updatedAt url author { login } replyTo { databaseId }
            }
          }
        }
      }
    }
  }
  rateLimit { remaining resetAt }
}
"""


def test_graphql_review_threads_resolved_and_outdated(world: World) -> None:
    gh = world.gh
    first = gh.add_review_comment(
        world.repo, world.pull, author="octo", path="app.py", line=20, body="One"
    )
    reply = gh.add_review_comment(
        world.repo, world.pull, author="mate", path="app.py", line=20, body="Two", in_reply_to=first
    )
    second = gh.add_review_comment(
        world.repo, world.pull, author="octo", path="app.py", line=19, start_line=18, body="Range"
    )
    third = gh.add_review_comment(
        world.repo, world.pull, author="octo", path="app.py", line=20, side="LEFT", body="Left"
    )
    gh.resolve_thread(first)
    gh.set_outdated(second)

    answer = graphql(gh, world.owner, THREADS, number=world.pull)
    assert "errors" not in answer
    threads = answer["data"]["repository"]["pullRequest"]["reviewThreads"]
    assert threads["totalCount"] == 3
    assert threads["pageInfo"]["hasNextPage"] is True
    one, two = threads["nodes"]
    assert (one["isResolved"], one["isOutdated"], one["line"], one["diffSide"]) == (
        True,
        False,
        20,
        "RIGHT",
    )
    assert [c["body"] for c in one["comments"]["nodes"]] == ["One", "Two"]
    assert one["comments"]["nodes"][1]["replyTo"] == {"databaseId": first}
    assert one["comments"]["nodes"][1]["databaseId"] == reply
    assert one["comments"]["nodes"][0]["author"] == {"login": "octo"}
    assert (two["isResolved"], two["isOutdated"], two["line"], two["originalLine"]) == (
        False,
        True,
        None,
        19,
    )
    assert answer["data"]["rateLimit"]["remaining"] > 0

    cursor = threads["pageInfo"]["endCursor"]
    rest = graphql(gh, world.owner, THREADS, number=world.pull, after=cursor)["data"]
    last = rest["repository"]["pullRequest"]["reviewThreads"]
    assert [t["comments"]["nodes"][0]["databaseId"] for t in last["nodes"]] == [third]
    assert last["nodes"][0]["diffSide"] == "LEFT"
    assert last["pageInfo"] == {"hasNextPage": False, "endCursor": last["pageInfo"]["endCursor"]}

    outdated = call(
        gh, "GET", f"/api/v3/repos/octo/app/pulls/{world.pull}/comments", token=world.owner
    ).body
    # GitHub's description allows no null `line` or `position`: an outdated comment has none.
    assert [
        ("line" in c, "position" in c, c["original_line"]) for c in outdated if c["id"] == second
    ] == [(False, False, 19)]


def test_graphql_errors_come_as_github_sends_them(world: World) -> None:
    gh = world.gh
    too_many = graphql(
        gh, world.owner, THREADS.replace("first: 2", "first: 101"), number=world.pull
    )
    assert too_many["errors"][0]["type"] == "EXCESSIVE_PAGINATION"
    assert "exceeds the `first` limit of 100 records" in too_many["errors"][0]["message"]

    missing = graphql(gh, world.stranger, THREADS, number=world.pull)
    assert missing["data"]["repository"] is None
    assert missing["errors"][0]["type"] == "NOT_FOUND"
    assert missing["errors"][0]["path"] == ["repository"]

    invalid = graphql(gh, world.owner, "{ viewer { nonsense } }")
    assert "data" not in invalid
    assert invalid["errors"][0]["message"]
    assert graphql(gh, world.owner, "{ viewer { login } }") == {
        "data": {"viewer": {"login": "octo"}}
    }
    anonymous = call(gh, "POST", "/api/graphql", body={"query": "{ viewer { login } }"})
    assert anonymous.status == 401


# ----------------------------------------------------------------------------- checks, images


def test_check_runs_annotations_and_a_job_log(world: World) -> None:
    gh = world.gh
    head = gh.branch_sha(world.repo, "mate/twenty")
    assert head is not None
    lint = gh.add_check_run(
        world.repo, head, name="lint", conclusion="success", title="Clean", summary="No problems"
    )
    tests = gh.add_check_run(
        world.repo,
        head,
        name="tests",
        conclusion="failure",
        log="collected 3 items\nFAILED test_app.py::test_twenty\n",
        annotations=[
            Annotation(
                path="app.py",
                start_line=20,
                end_line=21,
                annotation_level="failure",
                message="boom",
                title="test_twenty",
            ),
            Annotation(
                path="app.py", start_line=1, end_line=1, annotation_level="warning", message="style"
            ),
        ],
        title="1 failed",
        summary="1 failed, 2 passed",
    )
    listed = call(
        gh, "GET", "/api/v3/repos/octo/app/commits/mate/twenty/check-runs", token=world.owner
    )
    assert listed.status == 200
    assert listed.body["total_count"] == 2
    runs = {r["name"]: r for r in listed.body["check_runs"]}
    assert (runs["lint"]["id"], runs["tests"]["id"]) == (lint, tests)
    failed = runs["tests"]
    assert (failed["status"], failed["conclusion"], failed["head_sha"]) == (
        "completed",
        "failure",
        head,
    )
    assert failed["output"]["annotations_count"] == 2
    assert re.search(rf"/octo/app/actions/runs/\d+/job/{tests}$", failed["details_url"])
    assert failed["app"]["slug"] == "github-actions"
    paged = call(
        gh, "GET", f"/api/v3/repos/octo/app/commits/{head}/check-runs?per_page=1", token=world.owner
    )
    assert (paged.body["total_count"], len(paged.body["check_runs"]), "next" in links(paged)) == (
        2,
        1,
        True,
    )

    notes = call(gh, "GET", failed["output"]["annotations_url"], token=world.owner).body
    assert [
        (a["path"], a["start_line"], a["end_line"], a["annotation_level"], a["message"], a["title"])
        for a in notes
    ] == [
        ("app.py", 20, 21, "failure", "boom", "test_twenty"),
        ("app.py", 1, 1, "warning", "style", None),
    ]

    redirect = call(
        gh, "GET", f"/api/v3/repos/octo/app/actions/jobs/{tests}/logs", token=world.owner
    )
    assert redirect.status == 302
    location = redirect.headers["location"]
    log = call(gh, "GET", location)  # the signed address needs no token
    assert log.status == 200
    assert log.headers["content-type"].startswith("text/plain")
    assert log.body == b"collected 3 items\nFAILED test_app.py::test_twenty\n"
    assert call(gh, "GET", location.replace("token=", "token=x")).status == 403
    assert (
        call(
            gh, "GET", f"/api/v3/repos/octo/app/actions/jobs/{lint}/logs", token=world.owner
        ).status
        == 404
    )


def test_pasted_images_are_served_to_readers_of_their_repository(world: World) -> None:
    gh = world.gh
    png = b"\x89PNG\r\n\x1a\nfake image"
    url = gh.upload_image(png, "image/png", repo=world.repo)
    assert re.fullmatch(rf"{gh.url}/user-attachments/assets/[0-9a-f-]{{36}}", url)
    assert call(gh, "GET", url).status == 404
    assert call(gh, "GET", url, token=world.stranger).status == 404
    redirect = call(gh, "GET", url, token=world.mate)
    assert redirect.status == 302
    image = call(gh, "GET", redirect.headers["location"])
    assert (image.status, image.headers["content-type"], image.body) == (200, "image/png", png)

    public = gh.upload_image(b"GIF89a", "image/gif")
    shown = call(gh, "GET", call(gh, "GET", public).headers["location"])
    assert shown.body == b"GIF89a"


# ----------------------------------------------------------------------------- rate limits


def test_rate_limits_of_both_kinds(world: World) -> None:
    gh = world.gh
    fine = call(gh, "GET", "/api/v3/user", token=world.owner)
    assert fine.status == 200
    assert fine.headers["x-ratelimit-limit"] == "5000"
    assert int(fine.headers["x-ratelimit-remaining"]) == 5000 - int(
        fine.headers["x-ratelimit-used"]
    )
    assert fine.headers["x-ratelimit-resource"] == "core"

    gh.limit_rate("primary", requests=2, seconds=120)
    for _ in range(2):
        refused = call(gh, "GET", "/api/v3/user", token=world.owner)
        assert refused.status == 403
        assert refused.headers["x-ratelimit-remaining"] == "0"
        assert (
            int(refused.headers["x-ratelimit-reset"])
            > int(fine.headers["x-ratelimit-reset"]) - 3600 + 100
        )
        octo = gh.user("octo").id
        assert refused.body["message"] == f"API rate limit exceeded for user ID {octo}."
    assert call(gh, "GET", "/api/v3/user", token=world.owner).status == 200

    gh.limit_rate("secondary", seconds=30, status=429)
    refused = call(gh, "GET", "/api/v3/user", token=world.owner)
    assert refused.status == 429
    assert refused.headers["retry-after"] == "30"
    assert refused.body["message"].startswith("You have exceeded a secondary rate limit")
    assert call(gh, "GET", "/api/v3/user", token=world.owner).status == 200

    assert [r.status for r in gh.requests() if r.path == "/api/v3/user"] == [
        200,
        403,
        403,
        200,
        429,
        200,
    ]


def test_the_conversation_survives_a_restart(world: World) -> None:
    gh = world.gh
    gh.add_comment(world.repo, world.pull, author="octo", body="hi")
    root = gh.add_review_comment(
        world.repo, world.pull, author="octo", path="app.py", line=21, body="Why?"
    )
    gh.resolve_thread(root)
    head = gh.branch_sha(world.repo, "mate/twenty")
    assert head is not None
    run = gh.add_check_run(
        world.repo,
        head,
        name="tests",
        conclusion="success",
        log="ok\n",
        annotations=[Annotation("app.py", 1, 1, "notice", "fine")],
    )
    image = gh.upload_image(b"png", "image/png", repo=world.repo)
    gh.delete_user("stranger")
    gh.stop()

    with FakeGitHub(gh.state_dir) as again:
        issue = again.issue(world.repo, world.pull)
        assert [c.body for c in issue.comments] == ["hi"]
        assert [(c.id, c.resolved) for c in issue.review_comments] == [(root, True)]
        assert [r.id for r in again.state.repos[world.repo].check_runs] == [run]
        assert again.user("stranger").deleted
        name = image.rpartition("/")[2]
        found = again.attachment(name)
        assert found is not None
        assert found[1] == b"png"
