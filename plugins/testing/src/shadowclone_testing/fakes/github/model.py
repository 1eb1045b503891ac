"""The fake GitHub's state: users, tokens, repositories, issues and pull requests.

Kept as attrs classes and written to one JSON file after every change, so a fake GitHub started
again on the same folder finds everything as it was (the bare git repositories sit beside it).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Literal

import attrs
from cattrs.preconf.json import make_converter

Permission = Literal["admin", "write", "read", "none"]
PERMISSIONS: tuple[Permission, ...] = ("admin", "write", "read", "none")

_converter = make_converter(forbid_extra_keys=True)


def now() -> str:
    """GitHub's timestamp format."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owner_of(full_name: str) -> str:
    return full_name.partition("/")[0]


class ApiError(Exception):
    """A refusal the REST API answers with `status` and GitHub's JSON error body."""

    def __init__(
        self, status: int, message: str, errors: tuple[dict[str, str] | str, ...] = ()
    ) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message
        self.errors = errors


@attrs.frozen
class User:
    login: str
    name: str
    email: str
    id: int
    deleted: bool = False
    """A deleted account: GitHub shows its content with no author (`null`), or where its REST
    description allows no null (a pull request's `user`), as its `ghost` account."""


@attrs.frozen
class Comment:
    id: int
    author: str
    body: str
    created_at: str
    updated_at: str | None = None
    """None until the comment is edited."""

    @property
    def updated(self) -> str:
        return self.updated_at or self.created_at


ReviewState = Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING"]
Side = Literal["LEFT", "RIGHT"]


@attrs.frozen
class Review:
    id: int
    author: str
    state: ReviewState
    body: str
    commit_id: str
    submitted_at: str | None
    """None while PENDING, as GitHub leaves it."""


@attrs.frozen
class ReviewComment:
    """A comment on a line (or a range of lines) of a pull request's diff."""

    id: int
    review_id: int
    author: str
    body: str
    path: str
    line: int
    side: Side
    start_line: int | None
    start_side: Side | None
    commit_id: str
    diff_hunk: str
    created_at: str
    updated_at: str
    position: int | None = None
    """The legacy place: lines below the file's first `@@` in the diff, counting from 1."""
    in_reply_to: int | None = None
    """The thread's first comment, for a reply."""
    resolved: bool = False
    """Kept on a thread's first comment only, as is `outdated`."""
    outdated: bool = False


@attrs.frozen
class Annotation:
    path: str
    start_line: int
    end_line: int
    annotation_level: Literal["notice", "warning", "failure"]
    message: str
    title: str | None = None
    raw_details: str | None = None


@attrs.frozen
class CheckRun:
    id: int
    sha: str
    name: str
    status: Literal["queued", "in_progress", "completed"]
    conclusion: str | None
    started_at: str
    completed_at: str | None
    title: str | None
    summary: str | None
    text: str | None = None
    annotations: tuple[Annotation, ...] = ()
    job_id: int | None = None
    """A GitHub Actions job, for a check run with a log."""
    run_id: int | None = None
    log: str | None = None


@attrs.frozen
class Attachment:
    """An image pasted into an issue, kept in `attachments/` beside the state."""

    uuid: str
    content_type: str
    repo: str | None
    """The repository it was pasted in: a private one's attachments need a signed-in reader."""


@attrs.frozen
class PullFields:
    """What makes an issue a pull request: where its commits come from and go to."""

    head_repo: str
    """Full name of the repository holding the head branch: the base repository or a fork."""
    head_ref: str
    base_ref: str
    draft: bool = False


@attrs.frozen
class Issue:
    """An issue or, with `pull` set, a pull request: on GitHub they share one numbering."""

    number: int
    id: int
    title: str
    body: str
    author: str
    created_at: str
    updated_at: str
    state: Literal["open", "closed"] = "open"
    pull: PullFields | None = None
    comments: tuple[Comment, ...] = ()
    reviews: tuple[Review, ...] = ()
    review_comments: tuple[ReviewComment, ...] = ()

    @property
    def is_pull_request(self) -> bool:
        return self.pull is not None


@attrs.define
class Repo:
    owner: str
    name: str
    id: int
    private: bool
    default_branch: str
    created_at: str
    fork_of: str | None = None
    collaborators: dict[str, Permission] = attrs.Factory(dict)
    protected_branches: list[str] = attrs.Factory(list)
    push_denied: list[str] = attrs.Factory(list)
    """Logins whose pushes are refused whatever their permission."""
    issues: dict[int, Issue] = attrs.Factory(dict)
    check_runs: list[CheckRun] = attrs.Factory(list)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def permission(self, login: str | None) -> Permission:
        """What `login` may do here, as GitHub's collaborator permission names it."""
        if login is not None and login.lower() == self.owner.lower():
            return "admin"
        if login is not None and login in self.collaborators:
            return self.collaborators[login]
        return "none" if self.private else "read"


@attrs.define
class State:
    users: dict[str, User] = attrs.Factory(dict)
    tokens: dict[str, str] = attrs.Factory(dict)
    """Token to login."""
    repos: dict[str, Repo] = attrs.Factory(dict)
    attachments: dict[str, Attachment] = attrs.Factory(dict)
    last_id: int = 0

    def next_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def repo(self, full_name: str) -> Repo | None:
        """The repository named `full_name` in any letter case, as GitHub finds it."""
        repo = self.repos.get(full_name)
        if repo is not None:
            return repo
        folded = full_name.lower()
        return next((r for name, r in self.repos.items() if name.lower() == folded), None)


@attrs.frozen
class LoggedRequest:
    """One request the server received, REST or git, as a test sees it afterwards."""

    method: str
    path: str
    """The request target, query string included."""
    user: str | None
    """The login the token named, or None for an anonymous or refused request."""
    status: int

    @property
    def is_write(self) -> bool:
        """True for anything that could change GitHub: a REST call other than GET or HEAD, or a
        git push (fetches POST too, to `git-upload-pack`, and are reads; so does the ref listing
        before a push)."""
        path = self.path.partition("?")[0]
        if ".git/" in path:
            return path.endswith("/git-receive-pack")
        return self.method not in ("GET", "HEAD")


def load_state(path: Path) -> State:
    if not path.exists():
        return State()
    return _converter.loads(path.read_text(encoding="utf-8"), State)


def save_state(path: Path, state: State) -> None:
    """Atomic, so a restart never reads half a file; no fsync, as a fake needs to survive a
    restart of the server, not of the machine, and tests save after every change."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(_converter.dumps(state, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def dump_request(request: LoggedRequest) -> str:
    return _converter.dumps(request)


def load_request(line: str) -> LoggedRequest:
    return _converter.loads(line, LoggedRequest)
