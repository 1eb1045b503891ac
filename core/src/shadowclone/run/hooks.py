"""The clone's git hooks: a pre-push hook that lets the clone push its own branch and nothing
else.

Where the hook goes: a folder of ours inside the git directory (`<git-dir>/shadowclone-hooks`),
named by `core.hooksPath` in the repository's own config. Not `.git/hooks`, because a
`core.hooksPath` set by the repository's tooling (husky and the like) or by a global config would
make git ignore `.git/hooks` without a word; the repository's local config wins over global and
system config, and `install_pre_push_hook` writes it last. The price: the repository's own hooks
do not run inside the clone (the toolchain review stage runs its checks instead).

The hook is a small POSIX sh script with the allowed ref baked in, so it runs under git with
nothing of shadowclone importable. It sees every ref a push would update, whatever the command
line: other branch names, refspecs (`HEAD:main`, `x:refs/heads/main`), tags, deletes (also of the
clone's own branch), `--all`, `--mirror`. Any one refused ref refuses the whole push.

What it cannot see: `git push --no-verify` skips hooks by design, and so does a push run with
another `core.hooksPath` on the command line. So the hook is not what stops a hostile engine: the
engine holds no token, and the run program pushes from a git directory of its own, whose hook
it reinstalls right before every push. The hook in the engine's repository only says no early
to an honest mistake.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import stat
import subprocess
from pathlib import Path

from shadowclone.errors import BadInput, Refused, ShadowcloneError

log = logging.getLogger(__name__)

HOOKS_FOLDER = "shadowclone-hooks"
HOOK_NAME = "pre-push"

_SCRIPT = r"""#!/bin/sh
# Written by shadowclone: this clone may push its own branch and nothing else.
# git runs it as: pre-push <remote> <url>, with one line per ref on stdin:
#   <local ref> <local object> <remote ref> <remote object>
allowed={allowed}
what={what}
default={default}
refused=0
while read -r local_ref local_object remote_ref remote_object || [ -n "$local_ref" ]; do
    [ -n "$local_ref" ] || continue
    case "$local_object" in
        *[!0]*) deleting=no ;;
        *) deleting=yes ;;
    esac
    if [ "$remote_ref" = "$default" ]; then
        printf 'shadowclone: refusing to push to %s, the default branch\n' "$remote_ref" >&2
        refused=1
    elif [ "$remote_ref" != "$allowed" ]; then
        printf 'shadowclone: refusing to push to %s: this clone may push only %s\n' \
            "$remote_ref" "$what" >&2
        refused=1
    elif [ "$deleting" = yes ] || [ "$local_ref" = "(delete)" ]; then
        printf 'shadowclone: refusing to delete %s\n' "$remote_ref" >&2
        refused=1
    fi
done
exit $refused
"""


def pre_push_hook_script(branch: str | None, default_branch: str) -> str:
    """The hook's text. `branch=None` (a review-only clone) refuses every push."""
    # An empty allowed ref matches no remote ref: git always names one.
    allowed = f"refs/heads/{branch}" if branch is not None else ""
    return _SCRIPT.format(
        what=shlex.quote(allowed or "nothing (review only)"),
        allowed=shlex.quote(allowed),
        default=shlex.quote(f"refs/heads/{default_branch}"),
    )


def install_pre_push_hook(
    workspace: Path, branch: str | None, default_branch: str, git_dir: Path | None = None
) -> Path:
    """Write the hook and point `core.hooksPath` at its folder; safe to call again (the save step
    does, right before it pushes). Returns the hook's path. `git_dir`: a git directory other
    than the workspace's own (the run program's), used with no system or global config.

    Refuses a branch that is the default branch, and names git would not take as a branch.
    """
    _check_branch_name(default_branch)
    if branch is not None:
        _check_branch_name(branch)
        if branch == default_branch:
            raise Refused(f"the clone's branch may not be the default branch {default_branch!r}")
    hooks = _hooks_folder(workspace, git_dir)
    hooks.mkdir(exist_ok=True)
    hook = hooks / HOOK_NAME
    temporary = hooks / f".{HOOK_NAME}.tmp"
    temporary.write_text(pre_push_hook_script(branch, default_branch), encoding="utf-8")
    # As the umask left it (in a shared folder, shared), the owner's always; executable by
    # whoever may read it.
    mode = stat.S_IMODE(temporary.stat().st_mode) | 0o700
    temporary.chmod(mode | (mode & 0o444) >> 2)
    os.replace(temporary, hook)
    _git(workspace, "config", "--local", "core.hooksPath", str(hooks), git_dir=git_dir)
    log.info("pre-push hook installed at %s (allowed: %s)", hook, branch or "nothing")
    return hook


def pre_push_hook_installed(
    workspace: Path, branch: str | None, default_branch: str, git_dir: Path | None = None
) -> bool:
    """Whether git would run exactly our hook on the next push: the hooks path still points at our
    folder and the hook is unchanged and executable."""
    hooks = _hooks_folder(workspace, git_dir)
    configured = _git(workspace, "config", "core.hooksPath", check=False, git_dir=git_dir).strip()
    if not configured or Path(configured) != hooks:
        return False
    hook = hooks / HOOK_NAME
    try:
        text = hook.read_text(encoding="utf-8")
    except OSError:
        return False
    return text == pre_push_hook_script(branch, default_branch) and os.access(hook, os.X_OK)


def _hooks_folder(workspace: Path, git_dir: Path | None = None) -> Path:
    if git_dir is not None:
        return git_dir.resolve() / HOOKS_FOLDER
    common = Path(_git(workspace, "rev-parse", "--git-common-dir").strip())
    if not common.is_absolute():
        common = workspace / common
    return common.resolve() / HOOKS_FOLDER


def _check_branch_name(branch: str) -> None:
    if not _git_takes_branch(branch):
        raise BadInput(f"{branch!r} is not a branch name git accepts")


@functools.cache
def _git_takes_branch(branch: str) -> bool:
    """git's word on a full ref name depends on the name alone: asked once per name (the hook
    is installed twice per clone and again before every push)."""
    done = subprocess.run(
        ["git", "check-ref-format", f"refs/heads/{branch}"],
        cwd=os.sep,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0 and not branch.startswith("-")


def _git(workspace: Path, *args: str, check: bool = True, git_dir: Path | None = None) -> str:
    env = None
    if git_dir is not None:
        env = {
            **os.environ,
            "GIT_DIR": str(git_dir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
    done = subprocess.run(
        ["git", *args], cwd=workspace, capture_output=True, text=True, check=False, env=env
    )
    if check and done.returncode != 0:
        raise ShadowcloneError(f"git {' '.join(args)} failed in {workspace}: {done.stderr.strip()}")
    return done.stdout
