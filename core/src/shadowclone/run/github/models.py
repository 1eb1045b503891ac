"""What the clone reads of GitHub and writes to it, as small frozen value objects."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

import attrs

__all__ = [
    "Annotation",
    "CheckRun",
    "Comment",
    "ContentEntry",
    "InlineComment",
    "Issue",
    "IssueComment",
    "Permission",
    "PullRequest",
    "Repository",
    "Review",
    "ReviewThread",
    "ThreadComment",
    "User",
    "link_issue",
]

Permission = Literal["admin", "write", "read", "none"]


@attrs.frozen
class User:
    """The account a token signs in as: the clone commits under its name and email."""

    login: str
    name: str | None
    email: str | None


@attrs.frozen
class Repository:
    full_name: str
    private: bool
    visibility: str
    """"public", "private" or "internal" (GitHub Enterprise)."""
    default_branch: str
    permission: Permission
    """What the token's user may do in this repository."""
    clone_url: str

    @property
    def can_push(self) -> bool:
        return self.permission in ("admin", "write")


@attrs.frozen
class _Posted:
    """What an issue and a pull request both have: where, who, what, and in which state."""

    repository: str
    number: int
    title: str
    body: str
    author: str
    state: str
    html_url: str


@attrs.frozen
class Issue(_Posted):
    """An issue, or a pull request seen as an issue (`is_pull_request`)."""

    is_pull_request: bool


@attrs.frozen
class PullRequest(_Posted):
    head_branch: str
    head_repo: str | None
    """Full name of the repository holding the head branch; None once a fork is deleted."""
    head_sha: str
    base_branch: str

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.repository


@attrs.frozen
class Comment:
    id: int
    author: str
    body: str
    html_url: str


_CLOSING = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"


def link_issue(body: str, number: int) -> str:
    """`body` with a closing keyword for issue `number`, so merging the pull request closes it."""
    if re.search(rf"(?i)\b{_CLOSING}\s+#{number}\b", body):
        return body
    return f"{body.rstrip()}\n\nCloses #{number}".lstrip()


@attrs.frozen
class ContentEntry:
    """One entry of a folder in a repository."""

    path: str
    kind: str
    """`file`, `dir`, `symlink` or `submodule`."""
    size: int


# ----------------------------------------------------------------------------- the conversation


@attrs.frozen
class IssueComment:
    """A comment on an issue or on a pull request's conversation."""

    id: int
    author: str
    """`ghost` for a deleted account."""
    body: str
    created_at: datetime
    updated_at: datetime
    html_url: str


@attrs.frozen
class Review:
    """A pull request review: its verdict and its summary (its line comments are threads)."""

    id: int
    author: str
    state: str
    """APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED or PENDING."""
    body: str
    submitted_at: datetime | None
    html_url: str


@attrs.frozen
class ThreadComment:
    id: int
    """The REST id (`databaseId`), which a reply names."""
    author: str
    body: str
    created_at: datetime
    updated_at: datetime
    url: str


@attrs.frozen
class ReviewThread:
    """A conversation on lines of a pull request; resolved and outdated exist only in
    GraphQL."""

    id: str
    path: str
    line: int | None
    """The last line it is on, in the current diff; None once outdated."""
    start_line: int | None
    resolved: bool
    outdated: bool
    comments: tuple[ThreadComment, ...]
    comments_cut: bool = False
    """More comments than GitHub gave in one page."""


@attrs.frozen
class Annotation:
    path: str
    start_line: int
    end_line: int
    level: str
    """notice, warning or failure."""
    message: str
    title: str


@attrs.frozen
class CheckRun:
    id: int
    name: str
    status: str
    conclusion: str | None
    """success, failure, neutral, cancelled, skipped, timed_out, action_required or None
    while it runs."""
    title: str
    summary: str
    text: str
    app: str
    """The slug of the app that ran it: `github-actions` has job logs on GitHub."""
    html_url: str
    completed_at: datetime | None

    @property
    def failed(self) -> bool:
        return self.conclusion in ("failure", "timed_out", "action_required", "cancelled")


@attrs.frozen
class InlineComment:
    """One comment of a review on lines of the diff, as `POST .../reviews` takes it."""

    path: str
    line: int
    body: str
    start_line: int | None = None
    side: Literal["LEFT", "RIGHT"] = "RIGHT"
