"""The workspace: the repository checked out over HTTPS as the owner.

Two git directories serve one work tree. The engine works in the workspace's own `.git`,
which it may change at will: its config, hooks and attributes' filters are the engine's. The
run program keeps a git directory of its own (`private_git`), copied from the fresh clone
before the engine starts, where the engine can neither read nor write; every git command the
run program runs with the GitHub token (add, commit, push) runs there, with no system or
global config, and reads the work tree only as data. The engine's commits are read as objects
(its object folder is an alternate of ours), never by running git in its repository as the
run program; git there runs as the engine's user (`engine_git`).

The GitHub token never lands on disk (run/cloning.py).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import attrs

from shadowclone.run.cloning import (
    CREDENTIAL_HELPER,
    GIT_TIMEOUT_S,
    GitError,
    check_git,
    finish_clone,
    git_environment,
    start_clone,
)
from shadowclone.run.hooks import install_pre_push_hook
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.plan import Mode, Plan

log = logging.getLogger(__name__)

REVIEW_BRANCH = "shadowclone/review-{number}"
PRIVATE_GIT = "git"
"""The run program's git directory, inside its private folder."""
GIT_CONFIG = "gitconfig"
"""The run program's global git config: only `safe.directory` for the shared work tree."""
_OBJECT_ID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


@attrs.frozen
class Workspace:
    path: Path
    """The work tree, shared with the engine."""
    token: str
    base_ref: str = ""
    """The commit the clone's work started from."""
    private: Path | None = None
    """The run program's own folder, holding its git directory; None: the workspace's `.git`
    (before `prepare` made one)."""
    identity: EngineIdentity = attrs.field(factory=EngineIdentity)

    @property
    def git_dir(self) -> Path:
        return self.private / PRIVATE_GIT if self.private else self.path / ".git"

    @property
    def engine_git_dir(self) -> Path:
        return self.path / ".git"

    def git(self, *args: str, check: bool = True, env: Mapping[str, str] | None = None) -> str:
        """git as the run program, in its own git directory, over the work tree."""
        environment = {
            "GIT_DIR": str(self.git_dir),
            # The work tree is shared with the engine, whose files in it are not ours.
            **({"GIT_CONFIG_GLOBAL": str(self.private / GIT_CONFIG)} if self.private else {}),
            "GIT_WORK_TREE": str(self.path),
            # The engine's objects are read as data: its commits can be pushed without git
            # ever running in its repository as us.
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.engine_git_dir / "objects"),
            **(env or {}),
        }
        return git(self.path, *args, token=self.token, check=check, env=environment)

    def engine_git(self, *args: str, check: bool = True) -> str:
        """git in the engine's own repository, as the engine's user: its config and hooks can
        run nothing of ours."""
        home = self.path.parent / "engine" / "home"
        env = self.identity.environment(os.environ, home) if self.identity.isolated else None
        return git(
            self.path,
            *args,
            check=check,
            env=env,
            run_as=self.identity.argv_prefix(),
            inherit=not self.identity.isolated,
        )

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def engine_head(self) -> str | None:
        """The commit the engine's repository is at, checked as an object id and as a commit
        we can read; None if there is none to take."""
        found = self.engine_git("rev-parse", "--verify", "--quiet", "HEAD", check=False).strip()
        if not _OBJECT_ID.match(found):
            return None
        kind = self.git("cat-file", "-t", found, check=False).strip()
        return found if kind == "commit" else None

    def has_changes(self) -> bool:
        return bool(self.git("status", "--porcelain").strip())

    def take_engine_work(self, message: str) -> bool:
        """Make the run program's branch hold the engine's work: its commits when they follow
        the base, and then whatever it left uncommitted in the work tree, as one more commit.
        False if there was nothing."""
        prepared = start = self.head()
        head = self.engine_head()
        if head and self.git_code("merge-base", "--is-ancestor", start, head) == 0:
            start = head
        self.git("update-ref", "HEAD", start)
        self.git("read-tree", start)
        self.git("add", "--all")
        if self.git_code("diff-index", "--cached", "--quiet", start) == 1:
            self.git("commit", "--quiet", "--no-verify", "-m", message)
            return True
        return start != prepared

    def commit_engine_work(self, message: str) -> None:
        """Commit what the engine left in its own repository, as the engine (a review reads
        the change as commits)."""
        if self.engine_git("status", "--porcelain", check=False).strip():
            self.engine_git("add", "--all", check=False)
            self.engine_git("commit", "--quiet", "--no-verify", "-m", message, check=False)

    def git_code(self, *args: str) -> int:
        """The exit code of a git command of the run program's (a yes-or-no question)."""
        try:
            self.git(*args)
        except GitError as error:
            return error.code
        return 0

    def commits_since_base(self) -> int:
        return int(self.git("rev-list", "--count", f"{self.base_ref}..HEAD").strip() or 0)

    def diff_stat(self) -> str:
        return self.git("diff", "--stat", self.base_ref, "HEAD").strip()


def git(
    cwd: Path,
    *args: str,
    token: str = "",
    check: bool = True,
    env: Mapping[str, str] | None = None,
    run_as: tuple[str, ...] = (),
    inherit: bool = True,
) -> str:
    """Run git; `run_as` runs it as another user, with `env` alone (`inherit=False`)."""
    if inherit:
        environment = git_environment(token, env)
    else:
        environment = {**(env or {}), "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            [*run_as, "git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=environment,
            check=False,
            timeout=GIT_TIMEOUT_S,
            umask=0o007 if run_as else -1,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took more than {GIT_TIMEOUT_S:.0f} s") from None
    if check:
        check_git(args[0], done.returncode, done.stdout, done.stderr)
    return done.stdout


def clone(
    path: Path,
    clone_url: str,
    token: str,
    identity: EngineIdentity | None = None,
    *,
    again: bool = False,
    cache: Path | None = None,
) -> None:
    """Clone the repository's default branch into `path` (made, shared with the engine), before
    `prepare`: it needs only the repository's address, so it runs while the target is still
    being read. `again`: whatever an earlier clone left in `path` goes first. `cache`: the
    repository's cache to clone from (run/repocache.py)."""
    if again:
        shutil.rmtree(path, ignore_errors=True)
    shared_gid = (identity or EngineIdentity()).workspace_gid
    finish_clone(start_clone(path, clone_url, token, shared_gid, cache))


def prepare(
    path: Path,
    plan: Plan,
    token: str,
    private: Path | None = None,
    identity: EngineIdentity | None = None,
) -> Workspace:
    """In the fresh clone at `path` (`clone`): set the owner's identity, check out the clone's
    branch, install the pre-push hook, and copy the fresh git directory to the run program's
    `private` folder (default: `private` beside the workspace)."""
    identity = identity or EngineIdentity()
    private = private or path.parent / "private"
    engine = Workspace(path, token)  # the workspace's .git: ours until the engine starts
    user = plan.user
    engine.git("config", "user.name", user.name or user.login)
    engine.git("config", "user.email", user.email or f"{user.login}@users.noreply.github.com")
    default = plan.repository.default_branch
    if plan.mode is Mode.ISSUE:
        assert plan.branch is not None
        engine.git("checkout", "--quiet", "-b", plan.branch, f"origin/{default}")
    elif plan.mode is Mode.CONTINUE:
        assert plan.branch is not None
        engine.git("checkout", "--quiet", "-B", plan.branch, f"origin/{plan.branch}")
    else:
        local = REVIEW_BRANCH.format(number=plan.number)
        engine.git(
            "-c",
            f"credential.helper={CREDENTIAL_HELPER}",
            "fetch",
            "--quiet",
            "origin",
            f"pull/{plan.number}/head:{local}",
        )
        engine.git("checkout", "--quiet", local)
    install_pre_push_hook(path, plan.branch, default, git_dir=path / ".git")
    if plan.mode is Mode.ISSUE:
        base_ref = engine.head()  # a new branch: it starts where the default branch is
    else:
        base = plan.pull_request.base_branch if plan.pull_request else default
        base_ref = engine.git("merge-base", "HEAD", f"origin/{base}").strip()
    _make_private(private, path / ".git")
    workspace = Workspace(path, token, base_ref, private, identity)
    workspace.git("config", "credential.helper", CREDENTIAL_HELPER)
    install_pre_push_hook(path, plan.branch, default, git_dir=workspace.git_dir)
    return workspace  # shared as it was made: `clone` made its folder shared before git


def _make_private(private: Path, engine_git_dir: Path) -> None:
    """The run program's folder (0700) with a copy of the fresh git directory in it."""
    if private.exists():
        shutil.rmtree(private)
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    # One process copies it: a copy in Python takes the GIL back for every file.
    copied = subprocess.run(
        ["cp", "-a", "--", str(engine_git_dir), str(private / PRIVATE_GIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    if copied.returncode != 0:
        raise GitError(f"could not copy the fresh git directory: {copied.stderr.strip()}")
    trust_work_tree(private / GIT_CONFIG, engine_git_dir.parent)


def trust_work_tree(config: Path, work_tree: Path) -> None:
    """A global git config that lets git work in a work tree another user owns (git refuses
    one by default, and takes `safe.directory` from global config only)."""
    git(work_tree.parent, "config", "--file", str(config), "safe.directory", str(work_tree))
