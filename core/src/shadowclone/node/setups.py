"""Setup records: one file per repository prepared on this machine.

`shadowclone setup` writes them through `write_setup`; `start` reads them through `read_setup`.
"""

from __future__ import annotations

from pathlib import Path

from shadowclone.config.paths import Paths
from shadowclone.node import schemas
from shadowclone.node.schemas import SetupRecord


def setup_file(paths: Paths, repo_full_name: str) -> Path:
    owner, repo = repo_full_name.split("/", 1)
    return paths.setup_dir / owner.lower() / f"{repo.lower()}.json"


def write_setup(paths: Paths, record: SetupRecord) -> Path:
    path = setup_file(paths, record.repo)
    schemas.write(path, record)
    return path


def read_setup(paths: Paths, repo_full_name: str) -> SetupRecord | None:
    try:
        return schemas.read(setup_file(paths, repo_full_name), SetupRecord)
    except FileNotFoundError:
        return None
