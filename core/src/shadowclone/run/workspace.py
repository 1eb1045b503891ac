"""The workspace: the repository checked out over HTTPS as the owner (R25, R27, R31).

The GitHub token never lands on disk: git asks a credential helper that reads it from the
variable the run program sets for its own git calls only. The engine's environment does not
carry it, so the engine can neither fetch nor push on its own; the save step pushes.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import attrs

from shadowclone.errors import ShadowcloneError
from shadowclone.run.hooks import install_pre_push_hook
from shadowclone.run.target import Mode, Plan

log = logging.getLogger(__name__)

TOKEN_VARIABLE = "SHADOWCLONE_GIT_TOKEN"
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; echo username=x-access-token; '
    f'echo "password=${TOKEN_VARIABLE}"; }}; f'
)
REVIEW_BRANCH = "shadowclone/review-{number}"


class GitError(ShadowcloneError):
    pass


@attrs.frozen
class Workspace:
    path: Path
    token: str
    base_ref: str = ""
    """The commit the clone's work started from."""

    def git(self, *args: str, check: bool = True, env: Mapping[str, str] | None = None) -> str:
        return git(self.path, *args, token=self.token, check=check, env=env)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def has_changes(self) -> bool:
        return bool(self.git("status", "--porcelain").strip())

    def commit_all(self, message: str) -> bool:
        """Commit whatever the engine left uncommitted; False if there was nothing."""
        if not self.has_changes():
            return False
        self.git("add", "--all")
        self.git("commit", "--quiet", "--no-verify", "-m", message)
        return True

    def commits_since_base(self) -> int:
        return int(self.git("rev-list", "--count", f"{self.base_ref}..HEAD").strip() or 0)

    def diff_stat(self) -> str:
        return self.git("diff", "--stat", self.base_ref, "HEAD").strip()

    def diff(self, limit: int = 60_000) -> str:
        return self.git("diff", self.base_ref, "HEAD")[:limit]


def git(
    cwd: Path,
    *args: str,
    token: str = "",
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> str:
    environment = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        TOKEN_VARIABLE: token,
        **(env or {}),
    }
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        tail = " / ".join(detail[-3:]) if detail else f"exit {done.returncode}"
        raise GitError(f"git {args[0]} failed: {tail}")
    return done.stdout


def prepare(path: Path, plan: Plan, token: str) -> Workspace:
    """Clone the repository, set the owner's identity, check out the clone's branch, and
    install the pre-push hook (R27)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    clone_url = plan.repository.clone_url
    git(
        path.parent,
        "-c",
        f"credential.helper={CREDENTIAL_HELPER}",
        "clone",
        "--quiet",
        "--no-tags",
        clone_url,
        path.name,
        token=token,
    )
    workspace = Workspace(path, token)
    workspace.git("config", "credential.helper", CREDENTIAL_HELPER)
    user = plan.user
    workspace.git("config", "user.name", user.name or user.login)
    workspace.git("config", "user.email", user.email or f"{user.login}@users.noreply.github.com")
    default = plan.repository.default_branch
    if plan.mode is Mode.ISSUE:
        assert plan.branch is not None
        workspace.git("checkout", "--quiet", "-b", plan.branch, f"origin/{default}")
    elif plan.mode is Mode.CONTINUE:
        assert plan.branch is not None
        workspace.git("checkout", "--quiet", "-B", plan.branch, f"origin/{plan.branch}")
    else:
        local = REVIEW_BRANCH.format(number=plan.number)
        workspace.git("fetch", "--quiet", "origin", f"pull/{plan.number}/head:{local}")
        workspace.git("checkout", "--quiet", local)
    install_pre_push_hook(path, plan.branch, default)
    base = plan.pull_request.base_branch if plan.pull_request else default
    base_ref = workspace.git("merge-base", "HEAD", f"origin/{base}").strip()
    if plan.mode is Mode.ISSUE:
        base_ref = workspace.head()
    return attrs.evolve(workspace, base_ref=base_ref)
