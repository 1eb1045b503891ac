"""The repositories' caches as the owner's machine keeps them (run/repocache.py fills them): what
`status` shows and what `prune --caches` drops. Host code never runs git in them."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import attrs

from shadowclone import contract, files
from shadowclone.config import Paths
from shadowclone.errors import ShadowcloneError

DROP_LOCK_TIMEOUT_S = 5.0
"""How long a drop waits for a fill under way (a cache being filled is left for next time)."""


@attrs.frozen
class RepoCache:
    repo: str
    """`owner/name`, lowercased as the folder is."""
    path: Path
    bytes: int
    updated_at: datetime | None
    """When its mirror last fetched (None: no mirror filled yet)."""


def repo_caches(paths: Paths) -> list[RepoCache]:
    """Every repository's cache, by name."""
    return [_described(repo, path) for repo, path in _folders(paths)]


def drop_repo_caches(paths: Paths, keep: Iterable[str]) -> tuple[list[RepoCache], list[str]]:
    """Remove the caches of the repositories not in `keep` (those with an active clone, whose
    workspaces borrow the mirror's objects); those removed, and why others stayed."""
    kept = {repo.lower() for repo in keep}
    dropped: list[RepoCache] = []
    problems: list[str] = []
    for repo, path in _folders(paths):
        if repo in kept:
            problems.append(f"{repo}: a clone of it is active; its cache stays")
            continue
        cache = _described(repo, path)
        try:
            _remove_locked(path)
        except (ShadowcloneError, OSError) as error:
            problems.append(f"{repo}: its cache stays: {error}")
            continue
        dropped.append(cache)
    return dropped, problems


def _folders(paths: Paths) -> Iterator[tuple[str, Path]]:
    root = paths.repo_caches_dir
    for owner in _subfolders(root):
        for name in _subfolders(owner):
            yield f"{owner.name}/{name.name}", name


def _subfolders(folder: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False)]


def _described(repo: str, path: Path) -> RepoCache:
    total = 0
    stamps: list[float] = []
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
            if name in ("FETCH_HEAD", contract.REPO_CACHE_COMPLETE):
                stamps.append(info.st_mtime)
    updated = datetime.fromtimestamp(max(stamps), UTC) if stamps else None
    return RepoCache(repo, path, total, updated)


def _remove_locked(path: Path) -> None:
    """Remove a cache under the locks of its fills (the cache's, and that of a launcher's
    folder in it for another user, such as the Docker launcher's for a root owner)."""
    locks = [path / contract.REPO_CACHE_LOCK, *path.glob(f"*/{contract.REPO_CACHE_LOCK}")]
    held: list[files.FileLock] = []
    try:
        for lock in locks:
            taken = files.FileLock(lock, timeout=DROP_LOCK_TIMEOUT_S, mode=0o600)
            taken.__enter__()
            held.append(taken)
        shutil.rmtree(path)
    finally:
        for taken in reversed(held):
            taken.__exit__(None, None, None)
