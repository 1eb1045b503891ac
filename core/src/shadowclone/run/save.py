"""Save: commit what is left, push the clone's branch, open or update the pull request.

It runs on every ending, done or not, so no work is lost; only a clone that finished its work
opens a pull request. A review pushes nothing and posts one review of event COMMENT.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from shadowclone.errors import Refused
from shadowclone.plugin.types import Outcome
from shadowclone.run.github import GithubClient
from shadowclone.run.hooks import install_pre_push_hook
from shadowclone.run.plan import Mode, Plan
from shadowclone.run.review.findings import (
    Finding,
    commentable,
    inline_comment,
    place,
    review_body,
)
from shadowclone.run.workspace import Workspace


@attrs.frozen
class Saved:
    commits: int
    pushed: bool
    pr_url: str | None
    note: str


MAX_SCANNED_BYTES = 8 * 1024 * 1024
"""A file larger than this is not searched for secrets (nor is a link: git pushes its target's
name, not what it points to)."""


def secrets_in_push(workspace: Workspace, redact: Callable[[str], str]) -> list[str]:
    """Where the commits about to be pushed hold a secret: the files they change, as they are
    at HEAD, and their messages. Names only: the secret is never repeated."""
    found: list[str] = []
    messages = workspace.git("log", "--format=%B", f"{workspace.base_ref}..HEAD")
    if redact(messages) != messages:
        found.append("a commit message")
    names = workspace.git(
        "-c", "core.quotepath=off", "diff", "--name-only", "-z", "--no-renames",
        "--diff-filter=d", workspace.base_ref, "HEAD",
    )  # fmt: skip
    for name in filter(None, names.split("\0")):
        text = _plain_text(workspace.path / name)
        if text is not None and redact(text) != text:
            found.append(name)
    return found


def _plain_text(path: Path) -> str | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # a link, or gone
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCANNED_BYTES:
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read(MAX_SCANNED_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(descriptor)


def post_review(
    workspace: Workspace,
    plan: Plan,
    client: GithubClient,
    summary: str,
    findings: Sequence[Finding],
) -> Saved:
    """One review of event COMMENT: the findings that fit the diff inline, the rest in its
    body. Should GitHub refuse the inline comments all the same (its diff is not ours), the
    review goes again with every finding in its body."""
    assert plan.pull_request is not None
    repo = plan.repository.full_name
    diff = workspace.git(
        "diff", "--no-color", "--no-ext-diff", "--unified=3", f"{workspace.base_ref}...HEAD"
    )
    inline, rest = place(findings, commentable(diff))
    commit = workspace.git("rev-parse", "HEAD").strip()
    try:
        url = client.create_review(
            repo,
            plan.number,
            commit_id=commit,
            body=review_body(summary, rest),
            comments=tuple(inline_comment(finding) for finding in inline),
        )
    except Refused:
        if not inline:
            raise
        url = client.create_review(
            repo, plan.number, commit_id=commit, body=review_body(summary, [*inline, *rest])
        )
        inline, rest = [], [*inline, *rest]
    return Saved(
        0,
        False,
        plan.pull_request.html_url,
        f"review posted: {url} ({len(inline)} inline comments, {len(rest)} findings in its body)",
    )


def save(
    workspace: Workspace,
    plan: Plan,
    client: GithubClient,
    outcome: Outcome,
    summary: str,
    redact: Callable[[str], str] | None = None,
    allow_secrets: bool = False,
    *,
    draft: bool = False,
    findings: Sequence[Finding] = (),
) -> Saved:
    """`redact`: the clone's redactor; a secret it finds in the commits stops the push unless
    the owner allowed it for this clone (`allow_secrets`). The summary is already redacted.
    `draft`: the work ended unfinished at a cap: it opens a draft pull request."""
    repo = plan.repository.full_name
    if plan.mode is Mode.REVIEW:
        return post_review(workspace, plan, client, summary, findings)

    assert plan.branch is not None
    workspace.take_engine_work(f"shadowclone: work on #{plan.number} ({outcome})")
    commits = workspace.commits_since_base()
    if commits == 0:
        return Saved(0, False, None, "no changes to save")
    # Our own git directory, out of the engine's reach; the hook goes back all the same.
    if redact is not None and not allow_secrets:
        found = secrets_in_push(workspace, redact)
        if found:
            return Saved(
                commits,
                False,
                None,
                "push stopped: a secret is in " + ", ".join(found[:10])
                + (f" and {len(found) - 10} more" if len(found) > 10 else "")
                + "; nothing was pushed (start the clone with --allow-secrets to push it anyway)",
            )  # fmt: skip
    install_pre_push_hook(
        workspace.path, plan.branch, plan.repository.default_branch, git_dir=workspace.git_dir
    )
    workspace.git("push", "--quiet", "origin", f"HEAD:refs/heads/{plan.branch}")
    if outcome is not Outcome.DONE and not draft:
        return Saved(commits, True, None, f"work so far pushed to {plan.branch}")

    existing = client.find_open_pull_request(repo, plan.branch)
    if existing is not None:
        if plan.mode is Mode.CONTINUE:
            client.comment(repo, existing.number, summary)
        else:
            client.update_pull_request_body(repo, existing.number, summary, closes=plan.number)
        return Saved(commits, True, existing.html_url, f"pull request #{existing.number} updated")
    opened = client.open_pull_request(
        repo,
        title=plan.issue.title,
        body=summary,
        head=plan.branch,
        base=plan.repository.default_branch,
        closes=plan.number,
        draft=draft,
    )
    kind = "draft pull request" if draft else "pull request"
    return Saved(commits, True, opened.html_url, f"{kind} #{opened.number} opened")
