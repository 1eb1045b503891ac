"""Save (R31): commit what is left, push the clone's branch, open or update the pull request.

It runs on every ending, done or not, so no work is lost; only a clone that finished its work
opens a pull request. A review pushes nothing and leaves its report as a comment.
"""

from __future__ import annotations

import attrs

from shadowclone.plugin.types import Outcome
from shadowclone.run.github import GithubClient
from shadowclone.run.hooks import install_pre_push_hook
from shadowclone.run.target import Mode, Plan
from shadowclone.run.workspace import Workspace


@attrs.frozen
class Saved:
    commits: int
    pushed: bool
    pr_url: str | None
    note: str


def save(
    workspace: Workspace,
    plan: Plan,
    client: GithubClient,
    outcome: Outcome,
    summary: str,
) -> Saved:
    repo = plan.repository.full_name
    if plan.mode is Mode.REVIEW:
        assert plan.pull_request is not None
        comment = client.comment(repo, plan.number, summary)
        return Saved(0, False, plan.pull_request.html_url, f"review posted: {comment.html_url}")

    assert plan.branch is not None
    workspace.take_engine_work(f"shadowclone: work on #{plan.number} ({outcome})")
    commits = workspace.commits_since_base()
    if commits == 0:
        return Saved(0, False, None, "no changes to save")
    # Our own git directory, out of the engine's reach; the hook goes back all the same.
    install_pre_push_hook(
        workspace.path, plan.branch, plan.repository.default_branch, git_dir=workspace.git_dir
    )
    workspace.git("push", "--quiet", "origin", f"HEAD:refs/heads/{plan.branch}")
    if outcome is not Outcome.DONE:
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
    )
    return Saved(commits, True, opened.html_url, f"pull request #{opened.number} opened")
