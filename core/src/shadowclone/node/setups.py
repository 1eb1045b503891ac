"""Setup records: one file per repository prepared on this machine.

`shadowclone setup` writes them through `write_setup`; `start` reads them through `read_setup`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

from shadowclone.config.paths import Paths
from shadowclone.errors import BadInput
from shadowclone.node import schemas
from shadowclone.node.schemas import SetupRecord


def setup_file(paths: Paths, repo_full_name: str) -> Path:
    owner, repo = repo_full_name.split("/", 1)
    return paths.setup_dir / owner.lower() / f"{repo.lower()}.json"


def environment_dir(paths: Paths, repo_full_name: str) -> Path:
    """The repository's environment files as setup's check clone read them, by their paths in
    the repository: what its image is made from."""
    owner, repo = repo_full_name.split("/", 1)
    return paths.setup_dir / owner.lower() / f"{repo.lower()}.environment"


MAX_KEPT_BYTES = 64 * 1024 * 1024


def environment_files(
    paths: Paths, repo_full_name: str, only: Collection[str] | None = None
) -> dict[str, str]:
    """The environment files setup kept for the repository (those of `only`, when given), by
    their paths in it (bytes that are not UTF-8 kept as escapes: the image tag hashes them
    all)."""
    return files_in(environment_dir(paths, repo_full_name), only)


def files_in(folder: Path, only: Collection[str] | None = None) -> dict[str, str]:
    """The files under `folder` (those of `only`, when given) by their paths in it, as
    `environment_files` reads them."""
    found = folder.rglob("*") if only is None else (folder / name for name in only)
    files: dict[str, str] = {}
    total = 0
    for path in sorted(found):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            total += len(data)
            if total > MAX_KEPT_BYTES:
                raise BadInput(f"{folder}: over {MAX_KEPT_BYTES // 2**20} MiB of files")
            files[path.relative_to(folder).as_posix()] = data.decode("utf-8", "surrogateescape")
    return files


def keep_environment(paths: Paths, repo_full_name: str, found: Path | None) -> None:
    """Replace the repository's kept environment files with the folder `found` (None: it
    declares none now), whole or not at all."""
    target = environment_dir(paths, repo_full_name)
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=".environment-", dir=target.parent))
    try:
        if found is not None:
            shutil.copytree(found, fresh / "files", symlinks=True)
        old = fresh / "old"
        if target.exists():
            target.rename(old)
        if found is not None:
            (fresh / "files").rename(target)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def write_setup(paths: Paths, record: SetupRecord) -> Path:
    path = setup_file(paths, record.repo)
    schemas.write(path, record)
    return path


def read_setup(paths: Paths, repo_full_name: str) -> SetupRecord | None:
    try:
        return schemas.read(setup_file(paths, repo_full_name), SetupRecord)
    except FileNotFoundError:
        return None
