"""The fake GitHub's reviews over real HTTP: deleted users in every payload, reviews and their
refusals, review threads over REST and GraphQL, and GraphQL's errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from plugins.testing.tests.conftest import Call, Graphql, World


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
"""The review threads of a pull request, two a page, as the run program asks for them."""


# ----------------------------------------------------------------------------- deleted users


def test_a_deleted_user_is_nobody_in_every_payload(
    world: World, call: Call, graphql: Graphql
) -> None:
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


def test_a_review_with_a_comment_outside_the_diff_creates_nothing(world: World, call: Call) -> None:
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


def test_a_review_with_comments_shows_in_reviews_comments_and_threads(
    world: World, call: Call
) -> None:
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


def test_replies_join_the_thread_of_their_root(world: World, call: Call) -> None:
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


def test_graphql_review_threads_resolved_and_outdated(
    world: World, call: Call, graphql: Graphql
) -> None:
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


def test_graphql_errors_come_as_github_sends_them(
    world: World, call: Call, graphql: Graphql
) -> None:
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
