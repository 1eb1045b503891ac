"""The fake GitHub's conversation of an issue or pull request over real HTTP: pagination with
`Link` headers, comments and their edits, and the whole conversation across a restart.
(Reviews, checks and rate limits have files of their own; the world and the HTTP helpers are
fixtures of conftest.py.)"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone_testing.fakes.github import Annotation, FakeGitHub, openapi
from shadowclone_testing.fakes.github.paging import paginate

if TYPE_CHECKING:
    from plugins.testing.tests.conftest import Answer, Call, Links, World


# ----------------------------------------------------------------------------- pagination


def test_comments_come_in_pages_linked_as_github_links_them(
    world: World, call: Call, links: Links
) -> None:
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


def test_pages_over_http_for_any_page_size(world: World, call: Call, links: Links) -> None:
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


# ----------------------------------------------------------------------------- comments


def test_comments_since_a_time_and_edited_ones(world: World, call: Call) -> None:
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


# ----------------------------------------------------------------------------- a restart


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
