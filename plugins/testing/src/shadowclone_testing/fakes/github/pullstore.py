"""Pull requests in the fake GitHub: opened by tests (from a branch or a fork) and by `POST
/pulls` with GitHub's refusals, edited by `PATCH`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from shadowclone_testing.fakes.github import git
from shadowclone_testing.fakes.github.model import (
    ApiError,
    Issue,
    PullFields,
    Repo,
    now,
    owner_of,
)
from shadowclone_testing.fakes.github.store import GitHubStore


class PullRequestStore(GitHubStore):
    """The admin and write side of pull requests."""

    def create_pull_request(
        self,
        full_name: str,
        *,
        author: str,
        branch: str,
        title: str,
        body: str = "",
        files: Mapping[str, str] | None = None,
        base: str | None = None,
        fork: bool = False,
    ) -> int:
        """Open a pull request by `author` from `branch`, first committing `files` on it (an
        empty commit if none). With `fork`, the branch lives in `author`'s fork, as a
        stranger's pull request does."""
        with self.lock:
            repo = self._repo(full_name)
            self.user(author)
            base = base or repo.default_branch
            head_repo = full_name
            if fork:
                head_repo = f"{author}/{repo.name}"
                if self.state.repo(head_repo) is None:
                    self._fork(repo, author)
            self.commit(head_repo, branch, files or {}, author=author, message=title, start=base)
            return self.open_pull_request(
                full_name,
                author=author,
                head_repo=head_repo,
                head=branch,
                base=base,
                title=title,
                body=body,
            ).number

    def pull_requests(self, full_name: str) -> list[Issue]:
        """Every pull request of the repository, open or closed, oldest first."""
        with self.lock:
            issues = self._repo(full_name).issues.values()
            return sorted((i for i in issues if i.is_pull_request), key=lambda i: i.number)

    def open_pull_request(
        self,
        full_name: str,
        *,
        author: str,
        head_repo: str,
        head: str,
        base: str,
        title: str,
        body: str = "",
        draft: bool = False,
    ) -> Issue:
        """What `POST /pulls` does, with GitHub's refusals."""
        with self.lock:
            repo = self._repo(full_name)
            found = self.state.repo(head_repo)
            if found is None or self.branch_sha(found.full_name, head) is None:
                raise ApiError(422, "Validation Failed", _invalid("head"))
            head_repo = found.full_name
            if self.branch_sha(full_name, base) is None:
                raise ApiError(422, "Validation Failed", _invalid("base"))
            label = f"{owner_of(head_repo)}:{head}"
            for other in repo.issues.values():
                pull = other.pull
                if (
                    pull is not None
                    and other.state == "open"
                    and (pull.head_repo, pull.head_ref, pull.base_ref) == (head_repo, head, base)
                ):
                    message = f"A pull request already exists for {label}."
                    raise ApiError(
                        422,
                        "Validation Failed",
                        ({"resource": "PullRequest", "code": "custom", "message": message},),
                    )
            issue = self._new_issue(
                full_name,
                author=author,
                title=title,
                body=body,
                pull=PullFields(head_repo=head_repo, head_ref=head, base_ref=base, draft=draft),
            )
            path = self.repo_path(full_name)
            self._sync_pull_ref(repo, issue)
            if git.commits_between(path, f"refs/heads/{base}", f"refs/pull/{issue.number}/head"):
                return issue
            git.git(path, "update-ref", "-d", f"refs/pull/{issue.number}/head")
            del repo.issues[issue.number]
            self._save()
            message = f"No commits between {base} and {label}"
            raise ApiError(
                422,
                "Validation Failed",
                ({"resource": "PullRequest", "code": "custom", "message": message},),
            )

    def edit_pull_request(
        self,
        full_name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: Literal["open", "closed"] | None = None,
    ) -> Issue:
        with self.lock:
            repo = self._repo(full_name)
            changes: dict[str, Any] = {"updated_at": now()}
            if title is not None:
                changes["title"] = title
            if body is not None:
                changes["body"] = body
            if state is not None:
                changes["state"] = state
            issue = attrs.evolve(self.issue(full_name, number), **changes)
            repo.issues[number] = issue
            self._save()
            return issue

    def _fork(self, repo: Repo, owner: str) -> None:
        fork = Repo(
            owner=owner,
            name=repo.name,
            id=self.state.next_id(),
            private=repo.private,
            default_branch=repo.default_branch,
            created_at=now(),
            fork_of=repo.full_name,
        )
        git.clone_bare(self.repo_path(repo.full_name), self.repo_path(fork.full_name))
        self.state.repos[fork.full_name] = fork
        self._save()


def _invalid(field: str) -> tuple[dict[str, str], ...]:
    return ({"resource": "PullRequest", "field": field, "code": "invalid"},)
