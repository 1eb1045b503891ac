"""The engine's own identity: the second user of a clone.

The run program alone holds the secrets (the GitHub token, the model logins). The engine reads
text strangers can write, so it is treated as hostile: it runs as another user, who cannot read
the secrets file or any copy, cannot read or trace the run program's memory, environment or
file descriptors, and cannot signal it. The two share only the workspace and the engine's state
folder, through a group of their own.

The launcher names the two ids (`SHADOWCLONE_ENGINE_USER="UID:GID"`,
`SHADOWCLONE_SHARED_GROUP="GID"`); the run program then starts the engine, and everything else
that runs code the engine could have written (the repository's checks, git in the engine's own
repository), through `setpriv`, which switches user, drops every capability and sets
no_new_privs before it execs. A launcher that names no identity (the fake launcher run by a
normal user) gets a clone whose engine runs as the run program: `EngineIdentity.describe()`
says so in the clone's progress.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from shadowclone import contract, files
from shadowclone.errors import MalformedFile, ShadowcloneError

log = logging.getLogger(__name__)

ENGINE_USER_VARIABLE = contract.ENGINE_USER_VARIABLE
SHARED_GROUP_VARIABLE = contract.SHARED_GROUP_VARIABLE

_CAP_SETGID = 6
_CAP_SETUID = 7
SHARED_DIR_MODE = contract.SHARED_DIR_MODE
SHARED_UMASK = contract.SHARED_UMASK
READ_TIMEOUT_S = 30.0
"""How long a read of one of the engine's files as the engine may take."""


class IdentityError(ShadowcloneError):
    """The launcher named an engine identity the run program cannot take."""


def _parse_ids(text: str, count: int, variable: str) -> tuple[int, ...]:
    parts = text.split(":")
    if len(parts) != count or not all(part.isascii() and part.isdigit() for part in parts):
        shape = ":".join(["ID"] * count)
        raise IdentityError(f"{variable}={text!r} is not {shape} (numbers)")
    ids = tuple(int(part) for part in parts)
    if any(value == 0 for value in ids):
        raise IdentityError(f"{variable}={text!r}: the engine may not be root")
    return ids


def can_switch_users() -> bool:
    """Root, or CAP_SETUID and CAP_SETGID in the effective set (a launcher's ambient caps)."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    effective = int(line.split()[1], 16)
                    return bool(effective >> _CAP_SETUID & 1 and effective >> _CAP_SETGID & 1)
    except OSError:
        return False
    return False


@attrs.frozen
class EngineIdentity:
    """Who the engine runs as. `uid is None`: the same user as the run program."""

    uid: int | None = None
    gid: int | None = None
    shared_gid: int | None = None
    setpriv: str = "setpriv"

    @property
    def isolated(self) -> bool:
        return self.uid is not None

    @property
    def workspace_gid(self) -> int | None:
        """The group the workspace is shared with the engine through (None: not shared)."""
        return self.shared_gid if self.isolated else None

    def describe(self) -> str:
        if self.isolated:
            return (
                f"the engine runs as its own user (uid {self.uid}), apart from the run program "
                "that holds the secrets"
            )
        return (
            "the engine runs as the run program's user: this launcher gives it no user of its "
            "own, so it could read the secrets (use the Docker launcher, or run serve as root)"
        )

    def argv_prefix(self) -> tuple[str, ...]:
        """What goes before a program's argv to run it as the engine (empty when not
        isolated)."""
        if not self.isolated:
            return ()
        return (
            self.setpriv,
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            f"--groups={self.shared_gid}",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--no-new-privs",
            "--",
        )

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.argv_prefix(), *argv]

    def share(self, path: Path) -> None:
        """Make a folder the run program made writable by the engine too: the shared group,
        setgid, group-writable; files in it group-writable."""
        if not self.isolated:
            return
        assert self.shared_gid is not None
        for entry in _walk(path):
            info = entry.lstat()
            if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
                continue  # the engine's own: it shares them through its umask
            os.chown(entry, -1, self.shared_gid, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                os.chmod(entry, stat.S_IMODE(info.st_mode) | SHARED_DIR_MODE)
            else:
                os.chmod(entry, stat.S_IMODE(info.st_mode) | 0o060)

    def give(self, path: Path) -> None:
        """Hand a folder the run program just made to the engine (its state folder)."""
        if not self.isolated:
            return
        assert self.uid is not None and self.shared_gid is not None
        for entry in _walk(path):
            os.chown(entry, self.uid, self.shared_gid, follow_symlinks=False)
        os.chmod(path, SHARED_DIR_MODE)

    def remove(self, path: Path) -> None:
        """Remove a folder the engine wrote in: what is the engine's, as the engine (the run
        program may lack the right to), then the rest."""
        if self.isolated and path.exists():
            subprocess.run(
                self.wrap(["rm", "-rf", "--", str(path)]), capture_output=True, check=False
            )
        shutil.rmtree(path, ignore_errors=True)

    def reap(self, marker: tuple[str, str] | None = None) -> int:
        """Kill every process left running as the engine's user; returns how many.

        Where the run program may read their environment (it runs as root), only the processes
        carrying `marker` are killed: the user may serve other clones on the same machine.
        Where it may not (the Docker launcher's run program, in a container of its own), every
        process of the engine's user in sight is this clone's.
        """
        if not self.isolated:
            return 0
        import psutil  # here: the entry point imports this module before git starts

        killed = 0
        for process in psutil.process_iter(["uids"]):
            with contextlib.suppress(psutil.Error):
                if process.info["uids"] is None or process.info["uids"].real != self.uid:
                    continue
                if marker is not None:
                    try:
                        if process.environ().get(marker[0]) != marker[1]:
                            continue
                    except psutil.AccessDenied:
                        pass  # not ours to read: a container of this clone alone
                process.kill()
                killed += 1
        if killed:
            log.info("killed %d processes left by the engine's user", killed)
        return killed

    def read(self, root: Path, relative: str, limit: int) -> bytes:
        """A file in a folder the engine writes (its state folder), of at most `limit` bytes.
        Read as the engine when it is a user of its own: its files may be its alone, and
        through a link it reaches nothing it could not read itself. Otherwise read without
        following a link: the run program's own rights reach the secrets."""
        if not self.isolated:
            return files.read_beneath(root, relative, limit)
        files.relative_parts(relative)
        path = root / relative
        try:
            done = subprocess.run(
                self.wrap(["head", "-c", str(limit + 1), "--", str(path)]),
                capture_output=True,
                check=False,
                env={"PATH": os.defpath, "LC_ALL": "C"},
                timeout=READ_TIMEOUT_S,  # a FIFO in its place never ends
            )
        except subprocess.TimeoutExpired:
            raise MalformedFile(path, "not a plain file (its read never ended)") from None
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise MalformedFile(path, f"the engine cannot read it: {why[-1] if why else ''}")
        if len(done.stdout) > limit:
            raise MalformedFile(path, f"more than {limit} bytes; at most {limit} are read")
        return done.stdout

    def environment(self, base: Mapping[str, str], home: Path) -> dict[str, str]:
        """The variables everything run as the engine starts from: `base` without anything
        of the run program's own, and the engine's home."""
        env = {key: value for key, value in base.items() if not _private(key)}
        env.update({"HOME": str(home), "TMPDIR": str(home / "tmp")})
        return env


_PRIVATE_PREFIXES = ("SHADOWCLONE_",)
_PUBLIC = frozenset({"SHADOWCLONE_SCRIPT", "SHADOWCLONE_CLONE_ID"})


def _private(key: str) -> bool:
    """Variables the run program keeps to itself (paths of its secrets, its egress)."""
    return key.startswith(_PRIVATE_PREFIXES) and key not in _PUBLIC


def _walk(path: Path) -> Iterator[Path]:
    yield path
    for root, dirs, names in os.walk(path):
        for name in (*dirs, *names):
            yield Path(root) / name


def engine_identity(environ: Mapping[str, str] | None = None) -> EngineIdentity:
    """The identity the launcher named, or the run program's own when it named none."""
    environ = os.environ if environ is None else environ
    user = environ.get(ENGINE_USER_VARIABLE, "").strip()
    group = environ.get(SHARED_GROUP_VARIABLE, "").strip()
    if not user and not group:
        return EngineIdentity()
    if not user or not group:
        raise IdentityError(
            f"{ENGINE_USER_VARIABLE} and {SHARED_GROUP_VARIABLE} go together; only one is set"
        )
    uid, gid = _parse_ids(user, 2, ENGINE_USER_VARIABLE)
    (shared,) = _parse_ids(group, 1, SHARED_GROUP_VARIABLE)
    if uid == os.getuid():
        raise IdentityError(f"{ENGINE_USER_VARIABLE} names the run program's own user ({uid})")
    if not can_switch_users():
        raise IdentityError(
            f"the launcher asked for the engine to run as uid {uid}, and the run program "
            "cannot switch users (it needs root, or CAP_SETUID and CAP_SETGID)"
        )
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise IdentityError("setpriv (util-linux) is not installed: the engine cannot run apart")
    if shared not in os.getgroups() and os.geteuid() != 0:
        raise IdentityError(
            f"the run program is not in the shared group {shared} ({SHARED_GROUP_VARIABLE})"
        )
    return EngineIdentity(uid, gid, shared, setpriv)
