"""A pull request's reviews and review comments over REST, with GitHub's payloads."""

from __future__ import annotations

from typing import Any

from shadowclone_testing.fakes.github.model import ApiError, Issue, Repo, Review, ReviewComment
from shadowclone_testing.fakes.github.rest import (
    Call,
    Json,
    Reply,
    association,
    author_json,
)
from shadowclone_testing.fakes.github.reviewstore import DraftComment


def _pull(call: Call, owner: str, name: str, number: str) -> tuple[Repo, Issue]:
    repo = call.repo(owner, name)
    issue = call.issue(repo, number)
    if not issue.is_pull_request:
        raise ApiError(404, "Not Found")
    return repo, issue


def _visible(call: Call, issue: Issue) -> tuple[list[Review], list[ReviewComment]]:
    """A pending review, and its comments, show to its author only, as on GitHub."""
    reviews = [r for r in issue.reviews if r.state != "PENDING" or r.author == call.viewer]
    shown = {r.id for r in reviews}
    return reviews, [c for c in issue.review_comments if c.review_id in shown]


def review_json(call: Call, repo: Repo, issue: Issue, review: Review) -> Json:
    api = f"{call.api}/repos/{repo.full_name}/pulls/{issue.number}"
    html = f"{call.web}/{repo.full_name}/pull/{issue.number}#pullrequestreview-{review.id}"
    data: Json = {
        "id": review.id,
        "node_id": f"PRR_{review.id}",
        "user": author_json(call, review.author),
        "body": review.body,
        "state": review.state,
        "html_url": html,
        "pull_request_url": api,
        "author_association": association(repo, review.author),
        "_links": {"html": {"href": html}, "pull_request": {"href": api}},
        "commit_id": review.commit_id,
    }
    if review.submitted_at is not None:
        data["submitted_at"] = review.submitted_at
    return data


def review_comment_json(call: Call, repo: Repo, issue: Issue, comment: ReviewComment) -> Json:
    """A review comment; an outdated thread's comments have no `line` or `position` now.

    GitHub's description of `pull-request-review-comment` allows neither of those as null
    (integers, not nullable, not required), nor a null `start_side` (its enum is LEFT and
    RIGHT only): so a field with no value is left out, not sent as null."""
    root = comment
    if comment.in_reply_to is not None:
        root = next((c for c in issue.review_comments if c.id == comment.in_reply_to), comment)
    outdated = root.outdated
    head = call.store.head_sha(repo.full_name, issue.number)
    api = f"{call.api}/repos/{repo.full_name}"
    url = f"{api}/pulls/comments/{comment.id}"
    html = f"{call.web}/{repo.full_name}/pull/{issue.number}#discussion_r{comment.id}"
    pull_url = f"{api}/pulls/{issue.number}"
    data: Json = {
        "url": url,
        "pull_request_review_id": comment.review_id,
        "id": comment.id,
        "node_id": f"PRRC_{comment.id}",
        "diff_hunk": comment.diff_hunk,
        "path": comment.path,
        "commit_id": comment.commit_id if outdated else head,
        "original_commit_id": comment.commit_id,
        "user": author_json(call, comment.author),
        "body": comment.body,
        "created_at": comment.created_at,
        "updated_at": comment.updated_at,
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": association(repo, comment.author),
        "_links": {
            "self": {"href": url},
            "html": {"href": html},
            "pull_request": {"href": pull_url},
        },
        "start_line": None if outdated else comment.start_line,
        "original_start_line": comment.start_line,
        "original_line": comment.line,
        "side": comment.side,
        "subject_type": "line",
    }
    if comment.start_side is not None:
        data["start_side"] = comment.start_side
    if not outdated:
        data["line"] = comment.line
    if comment.position is not None:
        data["original_position"] = comment.position
        if not outdated:
            data["position"] = comment.position
    if comment.in_reply_to is not None:
        data["in_reply_to_id"] = comment.in_reply_to
    return data


def list_reviews(call: Call, owner: str, name: str, number: str) -> Reply:
    repo, issue = _pull(call, owner, name, number)
    reviews, _ = _visible(call, issue)
    return 200, [review_json(call, repo, issue, r) for r in call.page(reviews)]


def list_review_comments(call: Call, owner: str, name: str, number: str) -> Reply:
    repo, issue = _pull(call, owner, name, number)
    _, comments = _visible(call, issue)
    return 200, [review_comment_json(call, repo, issue, c) for c in call.page(comments)]


def _drafts(raw: Any) -> list[DraftComment]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ApiError(422, "Invalid request.\n\nFor 'properties/comments', is not an array.")
    drafts = []
    for item in raw:
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("body"), str)
            and all(isinstance(item.get(k), int | None) for k in ("line", "start_line", "position"))
            and all(item.get(k) in (None, "LEFT", "RIGHT") for k in ("side", "start_side"))
        )
        if not ok:
            raise ApiError(422, "Invalid request.\n\nFor 'items', is not valid.")
        drafts.append(
            DraftComment(
                path=item["path"],
                body=item["body"],
                line=item.get("line"),
                side=item.get("side") or "RIGHT",
                start_line=item.get("start_line"),
                start_side=item.get("start_side"),
                position=item.get("position"),
            )
        )
    return drafts


def create_review(call: Call, owner: str, name: str, number: str) -> Reply:
    author = call.signed_in()
    repo, issue = _pull(call, owner, name, number)
    data = call.json()
    event = data.get("event")
    body = data.get("body") or ""
    if not isinstance(body, str) or not isinstance(event, str | None):
        raise ApiError(422, "Invalid request.")
    commit_id = data.get("commit_id")
    review, _ = call.store.submit_review(
        repo.full_name,
        issue.number,
        author=author,
        body=body,
        event=event,
        commit_id=commit_id if isinstance(commit_id, str) else None,
        comments=_drafts(data.get("comments")),
    )
    return 200, review_json(call, repo, repo.issues[issue.number], review)


def create_reply(call: Call, owner: str, name: str, number: str, comment_id: str) -> Reply:
    author = call.signed_in()
    repo, issue = _pull(call, owner, name, number)
    body = call.json().get("body")
    if not isinstance(body, str) or not body:
        raise ApiError(422, "Validation Failed", ({"field": "body", "code": "missing_field"},))
    if not comment_id.isdigit():
        raise ApiError(404, "Not Found")
    reply = call.store.reply(
        repo.full_name, issue.number, int(comment_id), author=author, body=body
    )
    return 201, review_comment_json(call, repo, repo.issues[issue.number], reply)
