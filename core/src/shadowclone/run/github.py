"""The GitHub calls a clone and setup make, answered as small frozen value objects.

A thin typed layer over PyGithub pointed at `[github] api_url`, so github.com, GitHub Enterprise
and the fake GitHub are reached alike. Callers never see a PyGithub object or exception: every
failure becomes one `shadowclone.errors` line the owner can act on.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from types import TracebackType
from typing import Literal

import attrs
import github
import github.Auth
from github.PullRequest import PullRequest as _GhPullRequest

from shadowclone.errors import BadInput, Refused, ShadowcloneError

Permission = Literal["admin", "write", "read", "none"]

# GitHub asks for one request at a time per user (the client is used from one thread) and a
# second between writes (its secondary rate limits); it asks no pause between reads, and the
# target step's few reads are on the way to the engine's start.
SECONDS_BETWEEN_REQUESTS = 0.0
SECONDS_BETWEEN_WRITES = 1.0


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
class Issue:
    """An issue, or a pull request seen as an issue (`is_pull_request`)."""

    repository: str
    number: int
    title: str
    body: str
    author: str
    state: str
    html_url: str
    is_pull_request: bool


@attrs.frozen
class PullRequest:
    repository: str
    number: int
    title: str
    body: str
    author: str
    state: str
    html_url: str
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


class GithubClient:
    """The calls a clone needs, with a token, against one GitHub API."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        timeout: int = 30,
        seconds_between_requests: float = SECONDS_BETWEEN_REQUESTS,
        seconds_between_writes: float = SECONDS_BETWEEN_WRITES,
    ) -> None:
        self.api_url = api_url
        # Lazy: an object is fetched only when a field is read, so a write (a comment, a new
        # body) costs one request and no read before it.
        self._github = github.Github(
            base_url=api_url,
            auth=github.Auth.Token(token),
            timeout=timeout,
            seconds_between_requests=seconds_between_requests,
            seconds_between_writes=seconds_between_writes,
            lazy=True,
        )

    def close(self) -> None:
        self._github.close()

    def __enter__(self) -> GithubClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------------- reads

    def token_user(self) -> User:
        with self._calling("read the token's user"):
            user = self._github.get_user()
            return User(login=user.login, name=user.name, email=user.email)

    def repository(self, full_name: str) -> Repository:
        with self._calling(f"read the repository {full_name}"):
            repo = self._github.get_repo(full_name)
            permissions = repo.permissions
            permission: Permission = "none"
            if permissions is not None:
                if permissions.admin:
                    permission = "admin"
                elif permissions.push:
                    permission = "write"
                elif permissions.pull:
                    permission = "read"
            return Repository(
                full_name=repo.full_name,
                private=repo.private,
                visibility=repo.visibility or ("private" if repo.private else "public"),
                default_branch=repo.default_branch,
                permission=permission,
                clone_url=repo.clone_url,
            )

    def issue(self, full_name: str, number: int) -> Issue:
        with self._calling(f"read issue {full_name}#{number}"):
            issue = self._github.get_repo(full_name).get_issue(number)
            return Issue(
                repository=full_name,
                number=issue.number,
                title=issue.title,
                body=issue.body or "",
                author=issue.user.login,
                state=issue.state,
                html_url=issue.html_url,
                is_pull_request=issue.pull_request is not None,
            )

    def can_push(self, full_name: str, login: str) -> bool:
        """Whether `login` may push to the repository; anyone GitHub will not say so of, no."""
        try:
            permission = self._github.get_repo(full_name).get_collaborator_permission(login)
        except github.GithubException:
            return False
        return permission in ("admin", "maintain", "write")

    def pull_request(self, full_name: str, number: int) -> PullRequest:
        with self._calling(f"read pull request {full_name}#{number}"):
            return _pull_request(full_name, self._github.get_repo(full_name).get_pull(number))

    def find_open_pull_request(
        self, full_name: str, head_branch: str, *, head_owner: str | None = None
    ) -> PullRequest | None:
        """The open pull request from `head_branch` (in `head_owner`'s repository, by default
        the repository's owner), or None."""
        owner = head_owner or full_name.partition("/")[0]
        with self._calling(f"look for a pull request from {owner}:{head_branch} in {full_name}"):
            pulls = self._github.get_repo(full_name).get_pulls(
                state="open", head=f"{owner}:{head_branch}"
            )
            first = next(iter(pulls), None)
            return _pull_request(full_name, first) if first is not None else None

    # ------------------------------------------------------------------------- writes

    def open_pull_request(
        self,
        full_name: str,
        *,
        title: str,
        body: str,
        head: str,
        base: str,
        closes: int | None = None,
    ) -> PullRequest:
        """Open a pull request from branch `head` into `base`; with `closes`, its body links
        that issue so merging closes it."""
        if closes is not None:
            body = link_issue(body, closes)
        with self._calling(f"open a pull request from {head} into {base} in {full_name}"):
            pull = self._github.get_repo(full_name).create_pull(
                base=base, head=head, title=title, body=body
            )
            return _pull_request(full_name, pull)

    def update_pull_request_body(
        self, full_name: str, number: int, body: str, *, closes: int | None = None
    ) -> PullRequest:
        if closes is not None:
            body = link_issue(body, closes)
        with self._calling(f"update pull request {full_name}#{number}"):
            pull = self._github.get_repo(full_name).get_pull(number)
            pull.edit(body=body)
            return _pull_request(full_name, pull)

    def comment(self, full_name: str, number: int, body: str) -> Comment:
        """Comment on an issue or pull request."""
        with self._calling(f"comment on {full_name}#{number}"):
            comment = self._github.get_repo(full_name).get_issue(number).create_comment(body)
            return Comment(
                id=comment.id,
                author=comment.user.login,
                body=comment.body,
                html_url=comment.html_url,
            )

    # ------------------------------------------------------------------------- errors

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        try:
            yield
        except github.GithubException as e:
            raise _error(what, e) from e
        except OSError as e:  # requests' errors are OSErrors
            raise ShadowcloneError(
                f"GitHub at {self.api_url} cannot be reached to {what}: {_one_line(str(e))}"
            ) from e


def _pull_request(full_name: str, pull: _GhPullRequest) -> PullRequest:
    head_repo = pull.head.repo
    return PullRequest(
        repository=full_name,
        number=pull.number,
        title=pull.title,
        body=pull.body or "",
        author=pull.user.login,
        state=pull.state,
        html_url=pull.html_url,
        head_branch=pull.head.ref,
        head_repo=head_repo.full_name if head_repo is not None else None,
        head_sha=pull.head.sha,
        base_branch=pull.base.ref,
    )


def _error(what: str, error: github.GithubException) -> ShadowcloneError:
    data = error.data if isinstance(error.data, dict) else {}
    details = [str(data.get("message") or error.message or "")]
    details += [
        str(e["message"])
        for e in data.get("errors") or []
        if isinstance(e, dict) and "message" in e
    ]
    reason = _one_line(f"{error.status} {': '.join(d for d in details if d)}")
    if error.status == 401:
        return Refused(f"GitHub refused the token ({reason}) to {what}; check the GitHub token")
    if error.status == 404:
        return BadInput(
            f"GitHub cannot {what}: {reason} (it does not exist, or the token cannot see it)"
        )
    if error.status in (403, 422):
        return Refused(f"GitHub refused to {what}: {reason}")
    return ShadowcloneError(f"GitHub failed to {what}: {reason}")


def _one_line(text: str) -> str:
    return " ".join(text.split())
