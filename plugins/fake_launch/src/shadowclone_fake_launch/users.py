"""The engine's own user for clones the fake launcher runs as root.

Run by root (as CI runs it), the fake launcher isolates a clone's engine the way the Docker
launcher does: the run program keeps root's secrets, and the engine runs as a system user of
its own, sharing only the workspace through a group. The user and the group are made on first
use. Run by anyone else, it cannot switch users, and says so (`isolation()`).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess
from pathlib import Path

import attrs
from shadowclone.plugin import PluginUnavailable

ENGINE_USER = "shadowclone-engine"
SHARED_GROUP = "shadowclone-shared"


@attrs.frozen
class Isolation:
    uid: int
    gid: int
    shared_gid: int

    def env(self) -> dict[str, str]:
        """The run program's variables that name the engine's identity."""
        return {
            "SHADOWCLONE_ENGINE_USER": f"{self.uid}:{self.gid}",
            "SHADOWCLONE_SHARED_GROUP": str(self.shared_gid),
        }


def isolation_note() -> str:
    """One line for the owner: whether this launcher gives engines a user of their own."""
    if os.geteuid() == 0:
        return (
            f"the engine runs as the user {ENGINE_USER}, apart from the secrets, when that user "
            "can run this Python (scripts/open-python-path opens the project's)"
        )
    return (
        "run by a normal user it cannot switch users: the engine runs as the run program and "
        "could read the secrets (the Docker launcher keeps them apart)"
    )


def isolation() -> Isolation | None:
    """The engine's user and the shared group, made if missing; None when not root."""
    if os.geteuid() != 0:
        return None
    shared = _group(SHARED_GROUP)
    user = _user(ENGINE_USER)
    return Isolation(user.pw_uid, user.pw_gid, shared)


def _group(name: str) -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        _run(["groupadd", "--system", name])
        return grp.getgrnam(name).gr_gid


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        _run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ]
        )
        return pwd.getpwnam(name)


def _run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as error:
        raise PluginUnavailable(f"the fake launcher cannot run {argv[0]}: {error}") from None
    # Another launch may have made it meanwhile (exit 9: the name is taken): then it is there.
    if done.returncode not in (0, 9):
        raise PluginUnavailable(
            f"the fake launcher could not make the engine's user ({' '.join(argv)}): "
            + done.stderr.strip()
        )


def unreachable_folder(path: Path) -> Path | None:
    """The first folder above `path` (itself included) that other users cannot search, which
    would keep the engine's user out of its workspace; None if all can be."""
    for folder in (path, *path.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            return folder
    return None
