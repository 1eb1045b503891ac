"""The pre-push hook with real git: a bare remote, a clone of it, and every way around the hook
that the hook can see."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from shadowclone.errors import BadInput, Refused
from shadowclone.run.hooks import (
    HOOK_NAME,
    install_pre_push_hook,
    pre_push_hook_installed,
    pre_push_hook_script,
)

BRANCH = "shadowclone/5-fix-the-thing"
DEFAULT = "main"


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only this test's config: no global hooks path or identity from the machine."""
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = Owner\n\temail = owner@example.com\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


@attrs.frozen
class Repos:
    remote: Path
    workspace: Path

    def remote_refs(self) -> str:
        return git(self.remote, "for-each-ref", "--format=%(refname) %(objectname)").stdout

    def commit(self, name: str = "change.txt", content: str = "change\n") -> None:
        path = self.workspace / name
        path.write_text(path.read_text() + content if path.exists() else content)
        git(self.workspace, "add", name)
        git(self.workspace, "commit", "-q", "-m", f"edit {name}")

    def push(self, *args: str) -> subprocess.CompletedProcess[str]:
        return git(self.workspace, "push", *args, check=False)


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    """A remote with main, another branch and a tag; a workspace on the clone's branch with one
    new commit and the hook installed."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(remote), str(seed))
    (seed / "README.md").write_text("hello\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "-q", "-m", "first")
    git(seed, "tag", "v0")
    git(seed, "push", "-q", "origin", "main", "v0")
    git(seed, "push", "-q", "origin", "main:other")

    workspace = tmp_path / "workspace"
    git(tmp_path, "clone", "-q", str(remote), str(workspace))
    git(workspace, "checkout", "-q", "-b", BRANCH)
    found = Repos(remote, workspace)
    found.commit()
    install_pre_push_hook(workspace, BRANCH, DEFAULT)
    return found


def refused(repos: Repos, *push_args: str) -> str:
    """Push, expect the hook to refuse, and expect the remote unchanged; returns stderr."""
    before = repos.remote_refs()
    done = repos.push(*push_args)
    assert done.returncode != 0, f"git push {' '.join(push_args)} was not refused"
    assert "shadowclone: refusing" in done.stderr, done.stderr
    assert "hook declined" in done.stderr or "failed to push" in done.stderr, done.stderr
    assert repos.remote_refs() == before
    return done.stderr


def on_main_with_a_new_commit(repos: Repos) -> None:
    git(repos.workspace, "checkout", "-q", "main")
    repos.commit("main.txt")


def a_new_commit_on_main_elsewhere(repos: Repos) -> None:
    git(repos.workspace, "branch", "-q", "-f", "main", BRANCH)


def a_local_branch_named_other(repos: Repos) -> None:
    git(repos.workspace, "branch", "-q", "-f", "other", BRANCH)


def a_new_tag(repos: Repos) -> None:
    git(repos.workspace, "tag", "v1")


def a_new_annotated_tag(repos: Repos) -> None:
    git(repos.workspace, "tag", "-a", "-m", "release", "v1")


def the_clone_branch_pushed(repos: Repos) -> None:
    done = repos.push("origin", BRANCH)
    assert done.returncode == 0, done.stderr


def nothing(_repos: Repos) -> None:
    return None


REFUSED_PUSHES: list[tuple[str, Callable[[Repos], None], tuple[str, ...]]] = [
    ("main by name", on_main_with_a_new_commit, ("origin", "main")),
    ("plain push on main", on_main_with_a_new_commit, ()),
    ("HEAD:main", nothing, ("origin", "HEAD:main")),
    ("HEAD:refs/heads/main", nothing, ("origin", "HEAD:refs/heads/main")),
    ("branch:main", nothing, ("origin", f"{BRANCH}:main")),
    ("x:refs/heads/main", a_new_commit_on_main_elsewhere, ("origin", "main:refs/heads/main")),
    ("forced HEAD:main", nothing, ("--force", "origin", "HEAD:main")),
    ("+HEAD:main", nothing, ("origin", "+HEAD:main")),
    ("main by URL", nothing, ("{remote}", "HEAD:main")),
    ("another existing branch", nothing, ("origin", "HEAD:other")),
    ("another branch by its own name", a_local_branch_named_other, ("origin", "other")),
    ("a new branch", nothing, ("origin", "HEAD:feature")),
    ("a longer name", nothing, ("origin", f"HEAD:{BRANCH}2")),
    ("a name below the branch", nothing, ("origin", f"HEAD:refs/heads/x/{BRANCH}")),
    ("a tag by name", a_new_tag, ("origin", "v1")),
    ("all tags", a_new_tag, ("origin", "--tags")),
    ("a tag by refspec", nothing, ("origin", "HEAD:refs/tags/v2")),
    ("follow-tags", a_new_annotated_tag, ("--follow-tags", "origin", BRANCH)),
    ("a note-like ref", nothing, ("origin", "HEAD:refs/notes/commits")),
    ("a pull ref", nothing, ("origin", "HEAD:refs/pull/1/head")),
    ("the own branch plus main", a_new_commit_on_main_elsewhere, ("origin", BRANCH, "main")),
    ("the own branch plus a tag", a_new_tag, ("origin", BRANCH, "v1")),
    ("delete another branch", nothing, ("origin", "--delete", "other")),
    ("delete by empty source", nothing, ("origin", ":other")),
    ("delete main", nothing, ("origin", ":main")),
    ("delete a tag", nothing, ("origin", ":refs/tags/v0")),
    ("delete the own branch", the_clone_branch_pushed, ("origin", "--delete", BRANCH)),
    ("delete the own branch by refspec", the_clone_branch_pushed, ("origin", f":{BRANCH}")),
    ("all branches", a_new_commit_on_main_elsewhere, ("--all", "origin")),
    ("mirror", nothing, ("--mirror", "origin")),
    ("mirror with only the own branch", the_clone_branch_pushed, ("--mirror", "origin")),
    ("prune", the_clone_branch_pushed, ("--prune", "origin", "refs/heads/*:refs/heads/*")),
]


@pytest.mark.parametrize(
    ("prepare", "push_args"),
    [pytest.param(prepare, args, id=name) for name, prepare, args in REFUSED_PUSHES],
)
def test_each_way_around_the_hook_is_refused(
    repos: Repos, prepare: Callable[[Repos], None], push_args: tuple[str, ...]
) -> None:
    prepare(repos)
    args = tuple(arg.replace("{remote}", str(repos.remote)) for arg in push_args)
    refused(repos, *args)


def test_a_refused_ref_names_itself_and_the_default_branch(repos: Repos) -> None:
    stderr = refused(repos, "origin", "HEAD:main")
    assert "refs/heads/main, the default branch" in stderr
    stderr = refused(repos, "origin", "HEAD:other")
    assert f"refs/heads/other: this clone may push only refs/heads/{BRANCH}" in stderr


@pytest.mark.parametrize(
    "push_args",
    [
        ("origin", BRANCH),
        ("-u", "origin", "HEAD"),
        ("origin", f"HEAD:refs/heads/{BRANCH}"),
        ("origin", f"{BRANCH}:{BRANCH}"),
    ],
)
def test_the_clone_branch_is_pushed(repos: Repos, push_args: tuple[str, ...]) -> None:
    done = repos.push(*push_args)
    assert done.returncode == 0, done.stderr
    head = git(repos.workspace, "rev-parse", "HEAD").stdout.strip()
    assert f"refs/heads/{BRANCH} {head}" in repos.remote_refs()


def test_a_forced_push_of_the_clone_branch_is_allowed(repos: Repos) -> None:
    assert repos.push("origin", BRANCH).returncode == 0
    git(repos.workspace, "commit", "-q", "--amend", "-m", "reworded")
    assert repos.push("origin", BRANCH).returncode != 0  # not a fast-forward: git itself says no
    done = repos.push("--force", "origin", BRANCH)
    assert done.returncode == 0, done.stderr
    head = git(repos.workspace, "rev-parse", "HEAD").stdout.strip()
    assert f"refs/heads/{BRANCH} {head}" in repos.remote_refs()


def test_a_plain_push_after_upstream_is_set(repos: Repos) -> None:
    assert repos.push("-u", "origin", BRANCH).returncode == 0
    repos.commit()
    done = repos.push()
    assert done.returncode == 0, done.stderr


def test_a_review_only_clone_pushes_nothing(repos: Repos) -> None:
    install_pre_push_hook(repos.workspace, None, DEFAULT)
    stderr = refused(repos, "origin", BRANCH)
    assert "may push only nothing (review only)" in stderr
    refused(repos, "origin", "HEAD:main")


def test_a_branch_name_with_shell_characters(repos: Repos, tmp_path: Path) -> None:
    branch = "shadowclone/7-it's-$(touch${IFS}pwned)-`touch${IFS}pwned`\"x"
    git(repos.workspace, "checkout", "-q", "-b", branch)
    install_pre_push_hook(repos.workspace, branch, DEFAULT)
    refused(repos, "origin", "HEAD:main")
    refused(repos, "origin", f"HEAD:{BRANCH}")
    done = repos.push("origin", branch)
    assert done.returncode == 0, done.stderr
    assert f"refs/heads/{branch} " in repos.remote_refs()
    assert not list(tmp_path.rglob("pwned"))


def test_the_hooks_path_of_the_repository_is_overridden(repos: Repos) -> None:
    """A hooks path set by the repository's tooling would hide .git/hooks; ours wins again."""
    husky = repos.workspace / ".husky"
    husky.mkdir()
    git(repos.workspace, "config", "core.hooksPath", ".husky")
    assert not pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    assert repos.push("origin", "HEAD:main").returncode == 0  # the proof that the check matters

    hook = install_pre_push_hook(repos.workspace, BRANCH, DEFAULT)
    assert pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    assert hook.parent.parent == (repos.workspace / ".git").resolve()
    assert not list(husky.iterdir()), "nothing may be written into the working tree"
    refused(repos, "origin", "HEAD:other")


def test_a_global_hooks_path_does_not_hide_the_hook(repos: Repos, tmp_path: Path) -> None:
    elsewhere = tmp_path / "global-hooks"
    elsewhere.mkdir()
    git(repos.workspace, "config", "--global", "core.hooksPath", str(elsewhere))
    assert pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    refused(repos, "origin", "HEAD:main")


def test_a_changed_hook_is_noticed_and_reinstalled(repos: Repos) -> None:
    assert pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    assert not pre_push_hook_installed(repos.workspace, "shadowclone/other", DEFAULT)
    hook = install_pre_push_hook(repos.workspace, BRANCH, DEFAULT)
    assert hook.name == HOOK_NAME

    hook.write_text("#!/bin/sh\nexit 0\n")
    assert not pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    install_pre_push_hook(repos.workspace, BRANCH, DEFAULT)
    assert pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)

    hook.chmod(0o644)
    assert not pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    hook.unlink()
    assert not pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    git(repos.workspace, "config", "--unset", "core.hooksPath")
    assert not pre_push_hook_installed(repos.workspace, BRANCH, DEFAULT)
    install_pre_push_hook(repos.workspace, BRANCH, DEFAULT)
    refused(repos, "origin", "HEAD:main")


def test_the_default_branch_is_never_the_clone_branch(repos: Repos) -> None:
    with pytest.raises(Refused, match="default branch"):
        install_pre_push_hook(repos.workspace, DEFAULT, DEFAULT)


@pytest.mark.parametrize("branch", ["two words", "a..b", "x~1", "ends.lock", "-dash", "a:b", ""])
def test_a_bad_branch_name_is_refused(repos: Repos, branch: str) -> None:
    with pytest.raises(BadInput, match="not a branch name"):
        install_pre_push_hook(repos.workspace, branch, DEFAULT)


def test_the_hook_reads_input_without_a_final_newline(tmp_path: Path) -> None:
    hook = tmp_path / HOOK_NAME
    hook.write_text(pre_push_hook_script(BRANCH, DEFAULT))
    sha = "1" * 40
    ok = f"refs/heads/{BRANCH} {sha} refs/heads/{BRANCH} {'0' * 40}"
    bad = f"refs/heads/{BRANCH} {sha} refs/heads/main {'0' * 40}"
    sha256_delete = f"(delete) {'0' * 64} refs/heads/{BRANCH} {sha}"

    def run(stdin: str) -> int:
        return subprocess.run(
            ["sh", str(hook), "origin", "url"],
            input=stdin,
            text=True,
            capture_output=True,
            check=False,
            timeout=30,
        ).returncode

    assert run(ok) == 0
    assert run(ok + "\n") == 0
    assert run("") == 0
    assert run(f"{ok}\n{bad}") == 1
    assert run(sha256_delete) == 1
