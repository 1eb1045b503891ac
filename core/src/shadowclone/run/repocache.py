"""The repository's cache: a bare mirror of its branches, kept on the owner's machine (serve's
`repos` folder, `Paths.repo_cache`) and shared into each clone of the repository, so that a
clone fetches only what the mirror lacks and checks out from objects already on the disk.

The run program alone writes it, under the cache's lock, as files the engine's user may read
and never write (umask 022, the folder the owner's); it fetches the repository's own branches
only: a pull request's head, a fork's work, is fetched into the clone's workspace, never into
the mirror. A mirror whose first fill did not end (no `COMPLETE` marker: a crash or a kill) is
removed and made again. Its objects are never pruned (`gc.auto 0`): workspaces borrow them
(`git clone --shared`, alternates), so a cache is dropped only with no clone of the
repository active (`prune --caches`).

Run as `python -m shadowclone.run.repocache CACHE URL` in the folder of the workspace to make,
so that the head start can start it as one process and end it with its git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from shadowclone import contract, files
from shadowclone.errors import ShadowcloneError
from shadowclone.run.cloning import (
    CREDENTIAL_HELPER,
    GIT_TIMEOUT_S,
    TOKEN_VARIABLE,
    check_git,
    git_environment,
)

MIRROR = contract.REPO_CACHE_MIRROR
COMPLETE = contract.REPO_CACHE_COMPLETE
LOCK = contract.REPO_CACHE_LOCK
LOCK_TIMEOUT_S = GIT_TIMEOUT_S
"""A clone waits this long for another one's fill of the mirror (a first one takes long)."""
MIRROR_UMASK = 0o022
"""The mirror's files: the run program's to write, anyone's in the clone to read."""


def fill(cache: Path, workspace: Path, clone_url: str) -> None:
    """Bring the mirror in `cache` up to date with `clone_url`'s branches (made at the first
    use), then make `workspace` a clone of it that borrows its objects, whose origin is
    `clone_url`."""
    with files.FileLock(cache / LOCK, timeout=LOCK_TIMEOUT_S, mode=0o600):
        mirror = cache / MIRROR
        if (mirror / COMPLETE).is_file():
            _git(mirror, "remote", "set-url", "origin", clone_url)
            _git(mirror, "fetch", "--quiet", "--prune", "--no-tags", "origin", umask=MIRROR_UMASK)
        else:
            _make_mirror(cache, clone_url)
        # Local: no object is copied, the workspace's alternates name the mirror's. Only the
        # refs are read under the lock: the mirror never loses an object (no gc), so the
        # checkout, most of the time, runs beside the other clones' fills.
        _git(
            workspace,
            "clone",
            "--quiet",
            "--shared",
            "--no-tags",
            "--no-checkout",
            str(mirror),
            ".",
        )
    # On every CPU, as a clone from GitHub does (run/cloning.py).
    _git(workspace, "reset", "--quiet", "--hard", "HEAD", config=("checkout.workers=0",))
    _git(workspace, "remote", "set-url", "origin", clone_url)


def _make_mirror(cache: Path, clone_url: str) -> None:
    mirror, new = cache / MIRROR, cache / f"{MIRROR}.new"
    for leftover in (mirror, new):
        shutil.rmtree(leftover, ignore_errors=True)
    _git(cache, "clone", "--quiet", "--bare", "--no-tags", clone_url, new.name, umask=MIRROR_UMASK)
    _git(new, "config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*")
    _git(new, "config", "gc.auto", "0")
    (new / COMPLETE).write_bytes(b"")
    os.chmod(new / COMPLETE, 0o644)
    new.rename(mirror)


def _git(cwd: Path, *args: str, umask: int = -1, config: tuple[str, ...] = ()) -> None:
    # No hook of the mirror's ever runs (a fetch runs reference-transaction): only the run
    # program writes the mirror, and it installs none.
    settings = [f"credential.helper={CREDENTIAL_HELPER}", "core.hooksPath=/dev/null", *config]
    done = subprocess.run(
        ["git", *(part for setting in settings for part in ("-c", setting)), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=git_environment(os.environ.get(TOKEN_VARIABLE, "")),
        check=False,
        timeout=GIT_TIMEOUT_S,
        umask=umask,
    )
    check_git(args[0], done.returncode, done.stdout, done.stderr)


def main(argv: list[str]) -> int:
    cache, clone_url = argv
    try:
        fill(Path(cache), Path.cwd(), clone_url)
    except (ShadowcloneError, OSError, subprocess.TimeoutExpired) as error:
        print(f"the repository cache at {cache}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
