"""The REST routes of issues, their comments and pull requests.

They render through `rest`'s payloads, looked up when they answer, so that a test that swaps
a payload there sees it in every answer."""

from __future__ import annotations

import datetime

from shadowclone_testing.fakes.github import rest
from shadowclone_testing.fakes.github.call import Call
from shadowclone_testing.fakes.github.model import ApiError, owner_of
from shadowclone_testing.fakes.github.routing import Reply


def get_issue(call: Call, owner: str, name: str, number: str) -> Reply:
    repo = call.repo(owner, name)
    return 200, rest.issue_json(call, repo, call.issue(repo, number))


def list_comments(call: Call, owner: str, name: str, number: str) -> Reply:
    repo = call.repo(owner, name)
    issue = call.issue(repo, number)
    comments = list(issue.comments)
    since = call.query.get("since")
    if since is not None:
        try:
            cutoff = _instant(since)
        except ValueError as e:
            raise ApiError(
                422, "Validation Failed", ({"field": "since", "code": "invalid"},)
            ) from e
        comments = [c for c in comments if _instant(c.updated) >= cutoff]
    return 200, [rest.comment_json(call, repo, issue, c) for c in call.page(comments)]


def _instant(text: str) -> datetime.datetime:
    """An ISO 8601 time; one without a zone is UTC, as GitHub reads it."""
    moment = datetime.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def create_comment(call: Call, owner: str, name: str, number: str) -> Reply:
    author = call.signed_in()
    repo = call.repo(owner, name)
    issue = call.issue(repo, number)
    body = call.json().get("body")
    if not isinstance(body, str) or not body:
        raise ApiError(422, "Validation Failed", ({"field": "body", "code": "missing_field"},))
    comment = call.store.add_comment(repo.full_name, issue.number, author=author, body=body)
    return 201, rest.comment_json(call, repo, repo.issues[issue.number], comment)


def get_pull(call: Call, owner: str, name: str, number: str) -> Reply:
    repo = call.repo(owner, name)
    issue = call.issue(repo, number)
    if not issue.is_pull_request:
        raise ApiError(404, "Not Found")
    return 200, rest.pull_json(call, repo, issue)


def list_pulls(call: Call, owner: str, name: str) -> Reply:
    repo = call.repo(owner, name)
    state = call.query.get("state", "open")
    head = call.query.get("head")
    base = call.query.get("base")
    found = []
    for issue in sorted(repo.issues.values(), key=lambda i: -i.number):
        if issue.pull is None or state not in ("all", issue.state):
            continue
        if base is not None and issue.pull.base_ref != base:
            continue
        if head is not None:
            head_owner = owner_of(issue.pull.head_repo).lower()
            wanted_owner, _, wanted_ref = head.rpartition(":")
            if wanted_ref != issue.pull.head_ref or wanted_owner.lower() not in ("", head_owner):
                continue
        found.append(issue)
    return 200, [rest.pull_json(call, repo, issue) for issue in call.page(found)]


def create_pull(call: Call, owner: str, name: str) -> Reply:
    author = call.signed_in()
    repo = call.repo(owner, name)
    data = call.json()
    missing = [f for f in ("title", "head", "base") if not isinstance(data.get(f), str)]
    if missing:
        errors = tuple(
            {"resource": "PullRequest", "field": f, "code": "missing_field"} for f in missing
        )
        raise ApiError(422, "Validation Failed", errors)
    head_owner, _, head_ref = str(data["head"]).rpartition(":")
    head_repo = data.get("head_repo") or f"{head_owner or repo.owner}/{repo.name}"
    issue = call.store.open_pull_request(
        repo.full_name,
        author=author,
        head_repo=str(head_repo),
        head=head_ref,
        base=str(data["base"]),
        title=str(data["title"]),
        body=str(data.get("body") or ""),
        draft=bool(data.get("draft", False)),
    )
    return 201, rest.pull_json(call, repo, issue)


def update_pull(call: Call, owner: str, name: str, number: str) -> Reply:
    editor = call.signed_in()
    repo = call.repo(owner, name)
    issue = call.issue(repo, number)
    if not issue.is_pull_request:
        raise ApiError(404, "Not Found")
    if editor != issue.author and repo.permission(editor) not in ("admin", "write"):
        raise ApiError(403, "Resource not accessible by personal access token")
    data = call.json()
    state = data.get("state")
    if state not in (None, "open", "closed"):
        raise ApiError(422, "Validation Failed", ({"field": "state", "code": "invalid"},))
    issue = call.store.edit_pull_request(
        repo.full_name,
        issue.number,
        title=data.get("title"),
        body=data.get("body"),
        state=state,
    )
    return 200, rest.pull_json(call, repo, issue)
