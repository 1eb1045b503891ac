"""The fake launcher: each clone is a local process, with the folders a container would see.

Every clone gets a state folder `STATE_DIR/<clone id>/` (the equivalent of a container): the
launch (argv, environment), a private home, the clone's output, and what its keeper wrote. The
clone is told the secrets file's path, as a container is given its mount; this launcher never
opens the file. Run as root, it gives the engine a user of its own (`users.py`), so the engine
cannot read the secrets the run program holds; run by a normal user it cannot, and the engine
runs as the owner. The clone runs under a keeper (`keeper.py`) in a session of its own, so it
outlives serve; any launcher instance finds it again from the state folders, the keeper's lock
and psutil (pid and start time).

What a clone runs: the run program (`python -m shadowclone.run`), or, when the scripts file
named by `SHADOWCLONE_FAKE_SCRIPTS` lists its target, a test script (`player.py`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin import (
    CloneStatus,
    LaunchSpec,
    LaunchState,
    MalformedFile,
    PluginUnavailable,
    Refused,
    contract,
    default_paths,
    write_atomic,
)

from shadowclone_fake_launch import keeper, users
from shadowclone_fake_launch.scripts import SCRIPTS_VARIABLE, read_scripts, script_json

STATE_VARIABLE = "SHADOWCLONE_FAKE_LAUNCH_DIR"
"""Overrides where the fake launcher keeps its clones (default: beside the clones folder)."""

RUN_FOLDER_VARIABLE = contract.RUN_FOLDER_VARIABLE
SECRETS_VARIABLE = contract.SECRETS_VARIABLE
LOGIN_STATE_VARIABLE = contract.LOGIN_STATE_VARIABLE
CLONE_ID_VARIABLE = contract.CLONE_ID_VARIABLE

RUN_PROGRAM = "shadowclone.run"
PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "SHADOWCLONE_SCRIPT")
"""The only host variables a clone sees, as a container would have them; and the scripted
engine's script, a knob for tests like `SHADOWCLONE_FAKE_SCRIPTS`."""

TAIL_LINES = 40
TAIL_BYTES = 8000
START_TIMEOUT_S = 15.0
KILL_WAIT_S = 10.0


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    override = environ.get(STATE_VARIABLE)
    if override:
        return Path(override).expanduser().absolute()
    return default_paths(environ).clones_dir.parent / "fake-launch"


def run_program_available() -> bool:
    try:
        return importlib.util.find_spec(f"{RUN_PROGRAM}.__main__") is not None
    except ImportError:
        return False


def tail(path: Path, lines: int = TAIL_LINES, limit: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            data = handle.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:
        return None  # written atomically: only a foreign file can be torn
    return value if isinstance(value, dict) else None


def _alive(pid: int, create_time: float) -> bool:
    try:
        process = psutil.Process(pid)
        return (
            abs(process.create_time() - create_time) < 0.01
            and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def _lock_held(path: Path) -> bool:
    """True while a keeper (or a launch in progress) holds the clone's lock."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return True
        raise
    finally:
        os.close(fd)  # closing also drops a lock we took
    return False


class FakeLauncher:
    """A `Launcher` that runs clones as local processes (tests and the demo)."""

    def __init__(
        self,
        state_dir: Path | None = None,
        scripts_file: Path | None = None,
        python: str = sys.executable,
    ) -> None:
        self.state_dir = state_dir or default_state_dir()
        if scripts_file is None and os.environ.get(SCRIPTS_VARIABLE):
            scripts_file = Path(os.environ[SCRIPTS_VARIABLE])
        self.scripts_file = scripts_file
        self.python = python

    # ------------------------------------------------------------------ the protocol

    def check(self) -> None:
        if self.scripts_file is None and not run_program_available():
            raise PluginUnavailable(
                f"the fake launcher runs `python -m {RUN_PROGRAM}`, and this installation has "
                f"no run program yet; only test scripts can be played ({SCRIPTS_VARIABLE})"
            )
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise PluginUnavailable(
                f"the fake launcher cannot use {self.state_dir}: {error.strerror or error}"
            ) from None

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        """Its clones run as local processes, in no image: nothing to prepare."""
        if spec.environment is not None:
            say(
                f"the fake launcher runs no image: the environment {spec.environment.repo} "
                "declares is not built, its clone runs here"
            )
        return spec

    def launch(self, spec: LaunchSpec) -> None:
        folder = self._folder(spec.clone_id)
        if folder.exists():
            found = self.status(spec.clone_id)
            if found.state is not LaunchState.MISSING:
                raise Refused(
                    f"the fake launcher already has clone {spec.clone_id} ({found.state})"
                )
            shutil.rmtree(folder)  # a launch that died before its keeper started
        folder.mkdir(parents=True, mode=0o700)
        try:
            argv = self._argv(spec, folder)
        except BaseException:
            shutil.rmtree(folder)
            raise
        home = folder / "home"
        (home / "tmp").mkdir(parents=True)
        try:
            env = _clone_env(spec, home, self.python)
        except PluginUnavailable:
            shutil.rmtree(folder)
            raise
        write_atomic(
            folder / keeper.LAUNCH_FILE,
            json.dumps(
                {
                    "argv": argv,
                    "env": env,
                    "cwd": str(home),
                    "labels": dict(spec.labels),
                    "image": spec.image,
                    "network": str(spec.network),
                    "model_host": spec.model_host,
                    "created_at": datetime.now(UTC).isoformat(),
                }
            ).encode(),
            mode=0o600,
        )
        _start_keeper(self.python, folder, spec.clone_id)
        self._wait_started(spec.clone_id, folder)

    def status(self, clone_id: str) -> CloneStatus:
        folder = self._folder(clone_id)
        if not folder.is_dir():
            return CloneStatus(clone_id, LaunchState.MISSING)
        output = folder / keeper.OUTPUT_FILE
        ended = self._exit(folder)
        if ended is not None:
            return ended
        # A running clone's output is read only once it has ended (serve asks every few seconds).
        if _lock_held(folder / keeper.LOCK_FILE):
            return CloneStatus(clone_id, LaunchState.RUNNING)
        ended = self._exit(folder)  # the keeper may have written it and gone just now
        if ended is not None:
            return ended
        child = _read_json(folder / keeper.CHILD_FILE)
        if child is None:
            return CloneStatus(clone_id, LaunchState.MISSING)  # never got as far as starting
        if _alive(child["pid"], child["create_time"]):
            return CloneStatus(clone_id, LaunchState.RUNNING)
        note = "(the fake launcher's keeper died before the clone; its exit code is unknown)"
        return CloneStatus(
            clone_id, LaunchState.EXITED, None, "\n".join(filter(None, (tail(output), note)))
        )

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        if self.status(clone_id).state is not LaunchState.RUNNING:
            return
        folder = self._folder(clone_id)
        self._signal(folder, signal.SIGTERM)
        if self._wait_not_running(clone_id, grace_s):
            return
        self._signal(folder, signal.SIGKILL)
        if not self._wait_not_running(clone_id, KILL_WAIT_S):
            raise PluginUnavailable(
                f"clone {clone_id} is still running {KILL_WAIT_S:.0f} s after SIGKILL"
            )

    def remove(self, clone_id: str) -> None:
        if self.status(clone_id).state is LaunchState.RUNNING:
            self.stop(clone_id, grace_s=0)
        folder = self._folder(clone_id)
        deadline = time.monotonic() + KILL_WAIT_S
        while _lock_held(folder / keeper.LOCK_FILE) and time.monotonic() < deadline:
            time.sleep(0.02)  # the keeper writes how the clone ended, then goes
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(folder)

    def running(self) -> Sequence[CloneStatus]:
        try:
            names = sorted(e.name for e in os.scandir(self.state_dir) if e.is_dir())
        except FileNotFoundError:
            return []
        found = [self.status(name) for name in names if not name.startswith(".")]
        return [status for status in found if status.state is not LaunchState.MISSING]

    def host_address(self) -> str:
        return "127.0.0.1"  # a clone is a process of this machine

    def reap_strays(self) -> list[str]:
        """A clone process outlives nothing it needs removed: each keeps to its folder."""
        return []

    # ------------------------------------------------------------------ helpers

    def clone_folder(self, clone_id: str) -> Path:
        """The clone's state folder (its 'container'); tests look inside."""
        return self._folder(clone_id)

    def _folder(self, clone_id: str) -> Path:
        if not clone_id or "/" in clone_id or clone_id.startswith(".") or "\0" in clone_id:
            raise Refused(f"{clone_id!r} is not a clone id")
        return self.state_dir / clone_id

    def _argv(self, spec: LaunchSpec, folder: Path) -> list[str]:
        if self.scripts_file is not None:
            scripts = read_scripts(self.scripts_file)
            try:
                request = RunFolder(spec.run_folder).request()
            except FileNotFoundError:
                raise MalformedFile(
                    spec.run_folder / "request.json", "no request to launch"
                ) from None
            script = scripts.for_target(request.target.key)
            if script is not None:
                script_file = folder / "script.json"
                write_atomic(script_file, script_json(script, scripts.start_log).encode())
                return [self.python, "-m", "shadowclone_fake_launch.player", str(script_file)]
        if not run_program_available():
            raise PluginUnavailable(
                f"cannot launch clone {spec.clone_id}: the run program (`python -m "
                f"{RUN_PROGRAM}`) is not part of this installation yet"
            )
        return [self.python, "-m", RUN_PROGRAM]

    def _exit(self, folder: Path) -> CloneStatus | None:
        ended = _read_json(folder / keeper.EXIT_FILE)
        if ended is None:
            return None
        return CloneStatus(
            folder.name,
            LaunchState.EXITED,
            ended.get("exit_code"),
            tail(folder / keeper.OUTPUT_FILE),
        )

    def _signal(self, folder: Path, signum: signal.Signals) -> None:
        """Signal the clone's whole process group, as `docker stop` signals a container."""
        deadline = time.monotonic() + START_TIMEOUT_S
        child = _read_json(folder / keeper.CHILD_FILE)
        while child is None and time.monotonic() < deadline:
            if not _lock_held(folder / keeper.LOCK_FILE):
                return  # no keeper, so no clone to signal
            time.sleep(0.02)
            child = _read_json(folder / keeper.CHILD_FILE)
        if child is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child["pid"], signum)

    def _wait_not_running(self, clone_id: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.status(clone_id).state is not LaunchState.RUNNING:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _wait_started(self, clone_id: str, folder: Path) -> None:
        """Return once the clone's process exists (or has already ended), so that `stop`
        and `status` right after `launch` see it."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if (folder / keeper.CHILD_FILE).exists() or (folder / keeper.EXIT_FILE).exists():
                return
            if not _lock_held(folder / keeper.LOCK_FILE):
                break  # the keeper is gone without a word
            time.sleep(0.01)
        raise PluginUnavailable(
            f"the fake launcher's keeper for clone {clone_id} did not start it: "
            + (tail(folder / "keeper.log") or "no output")
        )


def _clone_env(spec: LaunchSpec, home: Path, python: str) -> dict[str, str]:
    """What a container would have in its environment; with a user of its own for the engine,
    `PluginUnavailable` where that user could not reach the interpreter or the run folder."""
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ}
    env.update(spec.env)
    engine = users.isolation()
    if engine is not None and users.unreachable_folder(Path(python).resolve().parent):
        # The engine's user cannot run this Python (one under root's home): the engine runs
        # as the run program does, which the run program says in the clone's log. Nothing
        # outside the launcher's own folders has its permissions changed to make it reachable.
        engine = None
    if engine is not None:
        blocked = users.unreachable_folder(spec.run_folder)
        if blocked is not None:
            raise PluginUnavailable(
                f"clone {spec.clone_id}: the engine's user {users.ENGINE_USER} cannot reach "
                f"its run folder, as {blocked} is closed to other users; make it "
                f"searchable (chmod o+x {blocked}) or keep the clones folder elsewhere"
            )
        env.update(engine.env())
    env.update(
        {
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            RUN_FOLDER_VARIABLE: str(spec.run_folder),
            SECRETS_VARIABLE: str(spec.secrets_file),
            CLONE_ID_VARIABLE: spec.clone_id,
        }
    )
    if spec.login_state is not None:
        env[LOGIN_STATE_VARIABLE] = str(spec.login_state)
    if spec.repo_cache is not None:
        env[contract.REPO_CACHE_VARIABLE] = str(spec.repo_cache.absolute())
    return env


def _start_keeper(python: str, folder: Path, clone_id: str) -> None:
    """Start the clone's keeper, handing it the clone's lock, taken before the keeper exists:
    from here on the clone counts as launched, even if this process dies before the keeper
    has started."""
    lock_fd = os.open(folder / keeper.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with open(folder / "keeper.log", "ab") as keeper_log:
            subprocess.run(
                [python, keeper.__file__, str(folder), str(lock_fd)],
                pass_fds=(lock_fd,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=keeper_log,
                stderr=subprocess.STDOUT,
                timeout=START_TIMEOUT_S,
                check=True,
            )
    except (OSError, subprocess.SubprocessError) as error:
        raise PluginUnavailable(
            f"the fake launcher could not start a keeper for clone {clone_id}: {error}"
        ) from None
    finally:
        os.close(lock_fd)
