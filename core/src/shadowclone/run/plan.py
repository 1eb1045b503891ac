"""Target resolution: what the clone works on, and how.

An issue becomes work on a new branch `shadowclone/N-short-title`. A pull request the owner
wrote in this repository is continued on its own branch. Any other pull request is only
reviewed: no push, no code run, no network but the model's.
"""

from __future__ import annotations

import enum
import re
from concurrent.futures import ThreadPoolExecutor

import attrs

from shadowclone.node.target import Target
from shadowclone.run.github import GithubClient, Issue, PullRequest, Repository, User


class Mode(enum.StrEnum):
    ISSUE = "issue"
    CONTINUE = "continue"
    REVIEW = "review"


@attrs.frozen
class Plan:
    mode: Mode
    repository: Repository
    issue: Issue
    user: User
    pull_request: PullRequest | None
    branch: str | None
    """The one branch the clone may push; None for a review."""
    stranger: str | None = None
    """Who wrote the issue, when they cannot push to the repository: their text is untrusted."""

    @property
    def owner_wrote(self) -> bool:
        return self.mode is not Mode.REVIEW

    @property
    def number(self) -> int:
        return self.issue.number

    def describe(self) -> str:
        what = f"#{self.number} {self.issue.title!r}"
        if self.mode is Mode.ISSUE:
            return f"issue {what}: work on a new branch {self.branch}"
        if self.mode is Mode.CONTINUE:
            return f"your pull request {what}: continue on its branch {self.branch}"
        author = self.pull_request.author if self.pull_request else "someone"
        return f"pull request {what} by {author}: review only"


def branch_name(number: int, title: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    short = words[:40].rstrip("-") or "work"
    return f"shadowclone/{number}-{short}"


def resolve(client: GithubClient, target: Target) -> Plan:
    """What the clone works on, and how. The three reads every target needs go at once (three
    requests, once per clone: far from what GitHub's limits on concurrent requests are about);
    a failure is told in their order, the repository's first."""
    name = target.repo_full_name
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="resolve") as pool:
        reading_repository = pool.submit(client.repository, name)
        reading_issue = pool.submit(client.issue, name, target.number)
        reading_user = pool.submit(client.token_user)
    repository = reading_repository.result()
    issue = reading_issue.result()
    user = reading_user.result()
    if not issue.is_pull_request:
        trusted = issue.author.casefold() == user.login.casefold() or client.can_push(
            target.repo_full_name, issue.author
        )
        return Plan(
            Mode.ISSUE,
            repository,
            issue,
            user,
            None,
            branch_name(issue.number, issue.title),
            stranger=None if trusted else issue.author,
        )
    pull = client.pull_request(target.repo_full_name, target.number)
    mine = pull.author.casefold() == user.login.casefold() and not pull.from_fork
    if mine and pull.state == "open" and pull.head_branch != repository.default_branch:
        return Plan(Mode.CONTINUE, repository, issue, user, pull, pull.head_branch)
    return Plan(Mode.REVIEW, repository, issue, user, pull, None)
