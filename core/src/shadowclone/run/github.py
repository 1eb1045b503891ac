"""The GitHub calls a clone and setup make, answered as small frozen value objects.

A thin typed layer pointed at `[github] api_url`, so github.com, GitHub Enterprise and the fake
GitHub are reached alike: gidgethub's sans-I/O half makes the headers and reads the answers
(errors, rate limits), httpx2 (which the model proxy and the MCP SDK load anyway) carries them.
A full object client costs the run program a third of its memory and a tenth of a second of
its start for the nine calls a clone makes. Callers never see a raw answer or a library's
exception: every failure becomes one `shadowclone.errors` line the owner can act on, and an
answer of the wrong shape is one too.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal

import attrs
import gidgethub
import gidgethub.sansio
import httpx2

from shadowclone.errors import BadInput, Refused, ShadowcloneError

Permission = Literal["admin", "write", "read", "none"]

# GitHub asks for one request at a time per user (the client takes a lock around each) and a
# second between writes (its secondary rate limits); it asks no pause between reads, and the
# target step's few reads are on the way to the engine's start.
SECONDS_BETWEEN_WRITES = 1.0
REQUESTER = "shadowclone"
"""The User-Agent GitHub asks every client to send."""


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


@attrs.frozen
class ContentEntry:
    """One entry of a folder in a repository."""

    path: str
    kind: str
    """`file`, `dir`, `symlink` or `submodule`."""
    size: int


class GithubClient:
    """The calls a clone needs, with a token, against one GitHub API."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        timeout: float = 30.0,
        seconds_between_writes: float = SECONDS_BETWEEN_WRITES,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._seconds_between_writes = seconds_between_writes
        self._last_write = -float("inf")
        self._lock = threading.Lock()
        self._http = httpx2.Client(
            headers=gidgethub.sansio.create_headers(REQUESTER, oauth_token=token),
            timeout=timeout,
            follow_redirects=True,  # a renamed repository answers with a redirect
        )

    def close(self) -> None:
        self._http.close()

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
        user = self._call("read the token's user", "GET", "/user")
        return User(
            login=user.text("login"),
            name=user.text_or_none("name"),
            email=user.text_or_none("email"),
        )

    def repository(self, full_name: str) -> Repository:
        repo = self._call(f"read the repository {full_name}", "GET", _repo_path(full_name))
        permissions = repo.part_or_none("permissions")
        permission: Permission = "none"
        if permissions is not None:
            if permissions.flag("admin"):
                permission = "admin"
            elif permissions.flag("push"):
                permission = "write"
            elif permissions.flag("pull"):
                permission = "read"
        private = repo.flag("private")
        return Repository(
            full_name=repo.text("full_name"),
            private=private,
            visibility=repo.text_or_none("visibility") or ("private" if private else "public"),
            default_branch=repo.text("default_branch"),
            permission=permission,
            clone_url=repo.text("clone_url"),
        )

    def issue(self, full_name: str, number: int) -> Issue:
        issue = self._call(
            f"read issue {full_name}#{number}", "GET", f"{_repo_path(full_name)}/issues/{number}"
        )
        return Issue(
            repository=full_name,
            number=issue.number("number"),
            title=issue.text("title"),
            body=issue.text_or_none("body") or "",
            author=issue.part("user").text("login"),
            state=issue.text("state"),
            html_url=issue.text("html_url"),
            is_pull_request=issue.part_or_none("pull_request") is not None,
        )

    def contents(
        self, full_name: str, path: str, ref: str | None = None
    ) -> bytes | list[ContentEntry] | None:
        """A file's bytes or a folder's entries at `ref` (the default branch when None), or
        None when the repository has nothing at `path`."""
        what = f"read {path} in {full_name}"
        route = f"{_repo_path(full_name)}/contents/{urllib.parse.quote(path, safe='/')}"
        try:
            data = self._call_raw(what, "GET", route, params={"ref": ref} if ref else None)
        except BadInput:
            return None
        if isinstance(data, list):
            entries = [_Answer(item, what) for item in data if isinstance(item, dict)]
            return [
                ContentEntry(entry.text("path"), entry.text("type"), entry.number("size"))
                for entry in entries
            ]
        if not isinstance(data, dict):
            raise _shape(what, "file or folder")
        answer = _Answer(data, what)
        if answer.text("type") != "file":
            return None
        try:
            return base64.b64decode(answer.text("content"), validate=False)
        except ValueError:
            raise _shape(what, "base64 'content'") from None

    def can_push(self, full_name: str, login: str) -> bool:
        """Whether `login` may push to the repository; anyone GitHub will not say so of, no."""
        path = f"{_repo_path(full_name)}/collaborators/{_segment(login)}/permission"
        try:
            answer = self._call(f"read {login}'s permission in {full_name}", "GET", path)
            permission = answer.text("permission")
        except ShadowcloneError:
            return False
        return permission in ("admin", "maintain", "write")

    def pull_request(self, full_name: str, number: int) -> PullRequest:
        pull = self._call(
            f"read pull request {full_name}#{number}",
            "GET",
            f"{_repo_path(full_name)}/pulls/{number}",
        )
        return _pull_request(full_name, pull)

    def find_open_pull_request(
        self, full_name: str, head_branch: str, *, head_owner: str | None = None
    ) -> PullRequest | None:
        """The open pull request from `head_branch` (in `head_owner`'s repository, by default
        the repository's owner), or None."""
        owner = head_owner or full_name.partition("/")[0]
        what = f"look for a pull request from {owner}:{head_branch} in {full_name}"
        found = self._call_raw(
            what,
            "GET",
            f"{_repo_path(full_name)}/pulls",
            params={"state": "open", "head": f"{owner}:{head_branch}", "per_page": "1"},
        )
        if not isinstance(found, list) or not all(isinstance(pull, dict) for pull in found):
            raise _shape(what, "a list of pull requests")
        return _pull_request(full_name, _Answer(found[0], what)) if found else None

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
        draft: bool = False,
    ) -> PullRequest:
        """Open a pull request from branch `head` into `base`; with `closes`, its body links
        that issue so merging closes it."""
        if closes is not None:
            body = link_issue(body, closes)
        pull = self._call(
            f"open a pull request from {head} into {base} in {full_name}",
            "POST",
            f"{_repo_path(full_name)}/pulls",
            body={"title": title, "body": body, "head": head, "base": base, "draft": draft},
        )
        return _pull_request(full_name, pull)

    def update_pull_request_body(
        self, full_name: str, number: int, body: str, *, closes: int | None = None
    ) -> PullRequest:
        if closes is not None:
            body = link_issue(body, closes)
        pull = self._call(
            f"update pull request {full_name}#{number}",
            "PATCH",
            f"{_repo_path(full_name)}/pulls/{number}",
            body={"body": body},
        )
        return _pull_request(full_name, pull)

    def comment(self, full_name: str, number: int, body: str) -> Comment:
        """Comment on an issue or pull request."""
        comment = self._call(
            f"comment on {full_name}#{number}",
            "POST",
            f"{_repo_path(full_name)}/issues/{number}/comments",
            body={"body": body},
        )
        return Comment(
            id=comment.number("id"),
            author=comment.part("user").text("login"),
            body=comment.text("body"),
            html_url=comment.text("html_url"),
        )

    # ------------------------------------------------------------------------- the wire

    def _call(
        self,
        what: str,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, object] | None = None,
    ) -> _Answer:
        data = self._call_raw(what, method, path, params=params, body=body)
        if not isinstance(data, dict):
            raise _shape(what, "an object")
        return _Answer(data, what)

    def _call_raw(
        self,
        what: str,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, object] | None = None,
    ) -> Any:
        with self._lock:
            if method != "GET":
                pause = self._last_write + self._seconds_between_writes - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            try:
                response = self._http.request(
                    method,
                    self.api_url + path,
                    params=params,
                    content=None if body is None else json.dumps(body).encode(),
                    headers=None if body is None else {"content-type": "application/json"},
                )
            except httpx2.HTTPError as error:
                raise ShadowcloneError(
                    f"GitHub at {self.api_url} cannot be reached to {what}: "
                    f"{_one_line(str(error)) or type(error).__name__}"
                ) from error
            finally:
                if method != "GET":
                    self._last_write = time.monotonic()
        try:
            data, _, _ = gidgethub.sansio.decipher_response(
                response.status_code, response.headers, response.content
            )
        except gidgethub.HTTPException as error:
            raise _error(what, error) from error
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ShadowcloneError(
                f"GitHub answered {response.status_code} to {what} with a body it cannot be "
                f"read from ({type(error).__name__})"
            ) from error
        return data


@attrs.frozen
class _Answer:
    """One JSON object GitHub answered, read field by field: a field of the wrong type is one
    line naming the call and the field, not a crash further on."""

    data: Mapping[str, Any]
    what: str

    def _get(self, key: str, kind: type, expected: str) -> Any:
        value = self.data.get(key)
        # JSON's true and false are Python ints too: a number field must not take them.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _shape(self.what, f"{expected} {key!r}")
        return value

    def text(self, key: str) -> str:
        value: str = self._get(key, str, "a string")
        return value

    def text_or_none(self, key: str) -> str | None:
        return None if self.data.get(key) is None else self.text(key)

    def number(self, key: str) -> int:
        value: int = self._get(key, int, "a number")
        return value

    def flag(self, key: str) -> bool:
        value: bool = self._get(key, bool, "true or false")
        return value

    def part(self, key: str) -> _Answer:
        return _Answer(self._get(key, dict, "an object"), self.what)

    def part_or_none(self, key: str) -> _Answer | None:
        return None if self.data.get(key) is None else self.part(key)


def _pull_request(full_name: str, pull: _Answer) -> PullRequest:
    head, base = pull.part("head"), pull.part("base")
    head_repo = head.part_or_none("repo")
    return PullRequest(
        repository=full_name,
        number=pull.number("number"),
        title=pull.text("title"),
        body=pull.text_or_none("body") or "",
        author=pull.part("user").text("login"),
        state=pull.text("state"),
        html_url=pull.text("html_url"),
        head_branch=head.text("ref"),
        head_repo=head_repo.text("full_name") if head_repo is not None else None,
        head_sha=head.text("sha"),
        base_branch=base.text("ref"),
    )


def _segment(text: str) -> str:
    """One path segment: nothing in a name can reach another endpoint."""
    return urllib.parse.quote(text, safe="")


def _repo_path(full_name: str) -> str:
    owner, _, name = full_name.partition("/")
    return f"/repos/{_segment(owner)}/{_segment(name)}"


def _shape(what: str, expected: str) -> ShadowcloneError:
    return ShadowcloneError(f"GitHub's answer to {what} holds no {expected}")


def _error(what: str, error: gidgethub.HTTPException) -> ShadowcloneError:
    message = error.args[0] if error.args and isinstance(error.args[0], str) else ""
    reason = _one_line(f"{int(error.status_code)} {message or error.status_code.phrase}")
    if error.status_code == 401:
        return Refused(f"GitHub refused the token ({reason}) to {what}; check the GitHub token")
    if error.status_code == 404:
        return BadInput(
            f"GitHub cannot {what}: {reason} (it does not exist, or the token cannot see it)"
        )
    if error.status_code in (403, 422):
        return Refused(f"GitHub refused to {what}: {reason}")
    return ShadowcloneError(f"GitHub failed to {what}: {reason}")


def _one_line(text: str) -> str:
    return " ".join(text.split())
