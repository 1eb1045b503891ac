"""The GitHub calls a clone and setup make, answered as small frozen value objects.

A thin typed layer pointed at `[github] api_url`, so github.com, GitHub Enterprise and the fake
GitHub are reached alike (wire.py carries the requests). A full object client costs the run
program a third of its memory and a tenth of a second of its start for the calls a clone makes.
"""

from __future__ import annotations

import base64
import urllib.parse

from shadowclone.errors import BadInput, ShadowcloneError
from shadowclone.run.github.conversation import ConversationCalls
from shadowclone.run.github.models import (
    ContentEntry,
    Issue,
    Permission,
    PullRequest,
    Repository,
    User,
)
from shadowclone.run.github.wire import (
    SECONDS_BETWEEN_WRITES,
    Answer,
    Waited,
    Wire,
    repo_path,
    segment,
    shape_error,
)
from shadowclone.run.github.writes import WriteCalls, pull_request_of


class GithubClient(ConversationCalls, WriteCalls):
    """The calls a clone needs, with a token, against one GitHub API."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        timeout: float = 30.0,
        seconds_between_writes: float = SECONDS_BETWEEN_WRITES,
        waited: Waited | None = None,
    ) -> None:
        self.wire = Wire(
            token,
            api_url=api_url,
            timeout=timeout,
            seconds_between_writes=seconds_between_writes,
            waited=waited,
        )
        self.api_url = self.wire.api_url

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> GithubClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- reads

    def token_user(self) -> User:
        user = self.wire.call("read the token's user", "GET", "/user")
        return User(
            login=user.text("login"),
            name=user.text_or_none("name"),
            email=user.text_or_none("email"),
        )

    def repository(self, full_name: str) -> Repository:
        repo = self.wire.call(f"read the repository {full_name}", "GET", repo_path(full_name))
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
        issue = self.wire.call(
            f"read issue {full_name}#{number}", "GET", f"{repo_path(full_name)}/issues/{number}"
        )
        return Issue(
            repository=full_name,
            number=issue.number("number"),
            title=issue.text("title"),
            body=issue.text_or_none("body") or "",
            author=issue.author(),
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
        route = f"{repo_path(full_name)}/contents/{urllib.parse.quote(path, safe='/')}"
        try:
            data = self.wire.call_raw(what, "GET", route, params={"ref": ref} if ref else None)
        except BadInput:
            return None
        if isinstance(data, list):
            entries = [Answer(item, what) for item in data if isinstance(item, dict)]
            return [
                ContentEntry(entry.text("path"), entry.text("type"), entry.number("size"))
                for entry in entries
            ]
        if not isinstance(data, dict):
            raise shape_error(what, "file or folder")
        answer = Answer(data, what)
        if answer.text("type") != "file":
            return None
        try:
            return base64.b64decode(answer.text("content"), validate=False)
        except ValueError:
            raise shape_error(what, "base64 'content'") from None

    def can_push(self, full_name: str, login: str) -> bool:
        """Whether `login` may push to the repository; anyone GitHub will not say so of, no."""
        path = f"{repo_path(full_name)}/collaborators/{segment(login)}/permission"
        try:
            answer = self.wire.call(f"read {login}'s permission in {full_name}", "GET", path)
            permission = answer.text("permission")
        except ShadowcloneError:
            return False
        return permission in ("admin", "maintain", "write")

    def pull_request(self, full_name: str, number: int) -> PullRequest:
        pull = self.wire.call(
            f"read pull request {full_name}#{number}",
            "GET",
            f"{repo_path(full_name)}/pulls/{number}",
        )
        return pull_request_of(full_name, pull)

    def find_open_pull_request(
        self, full_name: str, head_branch: str, *, head_owner: str | None = None
    ) -> PullRequest | None:
        """The open pull request from `head_branch` (in `head_owner`'s repository, by default
        the repository's owner), or None."""
        owner = head_owner or full_name.partition("/")[0]
        what = f"look for a pull request from {owner}:{head_branch} in {full_name}"
        found = self.wire.call_raw(
            what,
            "GET",
            f"{repo_path(full_name)}/pulls",
            params={"state": "open", "head": f"{owner}:{head_branch}", "per_page": "1"},
        )
        if not isinstance(found, list) or not all(isinstance(pull, dict) for pull in found):
            raise shape_error(what, "a list of pull requests")
        return pull_request_of(full_name, Answer(found[0], what)) if found else None
