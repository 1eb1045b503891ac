"""git run safely, and the repository's clone: the one git call a clone starts before the run
program is imported (run/headstart.py), so this module needs nothing but the standard library.

The GitHub token never lands on disk: git asks a credential helper that reads it from a
variable the run program sets for its own git calls only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from shadowclone import contract
from shadowclone.contract import SHARED_DIR_MODE
from shadowclone.errors import ShadowcloneError

TOKEN_VARIABLE = "SHADOWCLONE_GIT_TOKEN"
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; echo username=x-access-token; '
    f'echo "password=${TOKEN_VARIABLE}"; }}; f'
)
GIT_TIMEOUT_S = 30 * 60.0
SAFE_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_ATTR_NOSYSTEM": "1",
}
"""No config but the repository's own: a system or global file could name programs to run."""


class GitError(ShadowcloneError):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def git_environment(token: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The run program's own git's variables: the safe ones, and the token for the helper."""
    return {**os.environ, **SAFE_GIT_ENV, TOKEN_VARIABLE: token, **(env or {})}


def check_git(command: str, code: int, stdout: str, stderr: str) -> None:
    """Raise `GitError` with git's last words if `git command` failed."""
    if code != 0:
        detail = (stderr or stdout).strip().splitlines()
        tail = " / ".join(detail[-3:]) if detail else f"exit {code}"
        raise GitError(f"git {command} failed: {tail}", code)


def clone_url_for(github_url: str, full_name: str) -> str | None:
    """Where git clones `owner/name` on the GitHub at `github_url`, as GitHub names it when the
    name is spelled as GitHub spells it; None unless `github_url` is an http(s) URL (git would
    take anything else for a path or another transport)."""
    plain = github_url.isprintable() and not any(char.isspace() for char in github_url)
    if not plain or not github_url.startswith(("http://", "https://")):
        return None
    if not urllib.parse.urlsplit(github_url).netloc:
        return None
    return f"{github_url.rstrip('/')}/{full_name}.git"


def repo_cache(environ: Mapping[str, str]) -> Path | None:
    """The repository's cache the launcher shares into the clone, if it does."""
    found = environ.get(contract.REPO_CACHE_VARIABLE, "")
    return Path(found) if found.startswith("/") else None


def start_clone(
    path: Path,
    clone_url: str,
    token: str,
    shared_gid: int | None = None,
    cache: Path | None = None,
) -> subprocess.Popen[str]:
    """Start cloning the repository's default branch into `path` (made if need be);
    `finish_clone` waits for it. With `shared_gid`, `path` is first made a shared folder of
    that group, so everything git makes in it is shared with the engine as it is made (the
    caller sets `SHARED_UMASK`): no walk over the work tree afterwards. With `cache`, the
    repository's cache (run/repocache.py) is brought up to date and the clone made from it."""
    path.mkdir(parents=True, exist_ok=True)
    if shared_gid is not None and path.stat().st_uid == os.geteuid():
        os.chown(path, -1, shared_gid)
        os.chmod(path, SHARED_DIR_MODE)
    credentials = f"credential.helper={CREDENTIAL_HELPER}"
    # The checkout writes the work tree on every CPU (from 100 files on, git's threshold):
    # with thousands of files it is most of the clone, on the way to the engine's start.
    parallel = "checkout.workers=0"
    if cache is not None:
        argv = [sys.executable, "-m", "shadowclone.run.repocache", str(cache), clone_url]
    else:
        argv = ["git", "-c", credentials, "-c", parallel, "clone", "--quiet", "--no-tags"]
        argv += [clone_url, "."]
    return subprocess.Popen(
        argv,
        cwd=path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=git_environment(token),
        process_group=0,  # with git-remote-https, which holds the pipes too: `end_clone` ends both
    )


def finish_clone(process: subprocess.Popen[str]) -> None:
    """Wait for a clone `start_clone` started; raises `GitError` if it failed."""
    try:
        stdout, stderr = process.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        end_clone(process)
        raise GitError(f"git clone took more than {GIT_TIMEOUT_S:.0f} s") from None
    check_git("clone", process.returncode, stdout, stderr)


def end_clone(process: subprocess.Popen[str]) -> None:
    """Kill a clone `start_clone` started, with the helpers git started, and wait for it."""
    kill_clone(process)
    process.communicate()


def kill_clone(process: subprocess.Popen[str]) -> None:
    """Kill a clone `start_clone` started and the helpers git started (its process group),
    unless it was waited for already; whoever waits for it sees it end."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
