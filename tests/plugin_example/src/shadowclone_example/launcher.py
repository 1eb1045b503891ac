"""An example launcher: each clone is a local process of the owner's user, watched by a small
keeper (`shadowclone_example.keeper`) that outlives the process that launched it.

No isolation at all: it shows the launcher protocol, and passes the launcher contract of
shadowclone-testing; it is not a place to run an engine on strangers' text.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil
from shadowclone.plugin import CloneStatus, LaunchSpec, LaunchState, Refused, contract

RUN_PROGRAM = ("shadowclone-run",)
TAIL_BYTES = 4000
LAUNCH_GRACE_S = 30.0
"""How long a clone's folder may be without its keeper's pid before its launch counts as dead
(the launching process died between making the folder and starting the keeper)."""


class LocalLauncher:
    """Keeps one folder per clone under `state_dir`: the keeper's pid and start time, the
    clone's output, and its exit code once it ended."""

    def __init__(
        self,
        state_dir: Path,
        command_for: Callable[[LaunchSpec], Sequence[str] | None] | None = None,
        launch_grace_s: float = LAUNCH_GRACE_S,
    ) -> None:
        self.state_dir = state_dir
        self.command_for = command_for
        self.launch_grace_s = launch_grace_s

    def check(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)

    def prepare(
        self, spec: LaunchSpec, say: Callable[[str], None], cancel: threading.Event
    ) -> LaunchSpec:
        if spec.environment is not None:
            say("the local launcher builds no environment: the clone runs on this machine")
        return spec

    def launch(self, spec: LaunchSpec) -> None:
        folder = self.state_dir / spec.clone_id
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()  # atomic: one launch per clone, whichever launcher asks
        except FileExistsError:
            raise Refused(f"clone {spec.clone_id} was launched already") from None
        command = (self.command_for(spec) if self.command_for else None) or RUN_PROGRAM
        env = {
            **os.environ,
            **spec.env,
            contract.RUN_FOLDER_VARIABLE: str(spec.run_folder),
            contract.SECRETS_VARIABLE: str(spec.secrets_file),
            contract.CLONE_ID_VARIABLE: spec.clone_id,
        }
        keeper = subprocess.Popen(
            [sys.executable, "-m", "shadowclone_example.keeper", str(folder), *command],
            env=env,
            cwd=spec.run_folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        started = psutil.Process(keeper.pid).create_time()
        written = folder / "keeper.new"  # whole or absent: a reader never sees half of it
        written.write_text(f"{keeper.pid} {started}\n", encoding="utf-8")
        written.replace(folder / "keeper")

    def _keeper(self, clone_id: str) -> psutil.Process | None:
        try:
            pid, started = (self.state_dir / clone_id / "keeper").read_text().split()
            process = psutil.Process(int(pid))
            if process.create_time() != float(started) or process.status() == "zombie":
                return None
            return process
        except (OSError, ValueError, psutil.Error):
            return None

    def status(self, clone_id: str) -> CloneStatus:
        folder = self.state_dir / clone_id
        if not folder.is_dir():
            return CloneStatus(clone_id, LaunchState.MISSING)
        tail = _tail(folder / "output")
        exit_file = folder / "exit"
        if exit_file.exists():
            return CloneStatus(clone_id, LaunchState.EXITED, int(exit_file.read_text()), tail)
        if self._keeper(clone_id) is not None or self._launching(folder):
            return CloneStatus(clone_id, LaunchState.RUNNING, None, tail)
        return CloneStatus(clone_id, LaunchState.EXITED, None, tail)  # the keeper was killed

    def _launching(self, folder: Path) -> bool:
        """A launch under way: the folder is made, the keeper's pid not written yet."""
        if (folder / "keeper").exists():
            return False
        try:
            return time.time() - folder.stat().st_mtime < self.launch_grace_s
        except FileNotFoundError:
            return False

    def stop(self, clone_id: str, grace_s: float = 10.0) -> None:
        keeper = self._keeper(clone_id)
        if keeper is None:
            return
        keeper.send_signal(signal.SIGTERM)  # the keeper hands it to the clone
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.status(clone_id).state is LaunchState.RUNNING:
            time.sleep(0.05)
        if self.status(clone_id).state is LaunchState.RUNNING:
            with contextlib.suppress(ProcessLookupError):  # it ended between look and kill
                os.killpg(keeper.pid, signal.SIGKILL)
            keeper.wait(10)
            (self.state_dir / clone_id / "exit").write_text(f"{-signal.SIGKILL}\n")

    def remove(self, clone_id: str) -> None:
        self.stop(clone_id, grace_s=0)
        shutil.rmtree(self.state_dir / clone_id, ignore_errors=True)

    def running(self) -> Sequence[CloneStatus]:
        if not self.state_dir.is_dir():
            return []
        return [self.status(path.name) for path in sorted(self.state_dir.iterdir())]

    def host_address(self) -> str:
        return "127.0.0.1"  # a clone is a process of this machine

    def reap_strays(self) -> list[str]:
        """The folders of launches that died before their keeper started."""
        if not self.state_dir.is_dir():
            return []
        found = []
        for folder in sorted(self.state_dir.iterdir()):
            if not (folder / "keeper").exists() and not self._launching(folder):
                shutil.rmtree(folder, ignore_errors=True)
                found.append(f"the half-made launch {folder}")
        return found

    def traces(self, clone_id: str) -> list[str]:
        folder = self.state_dir / clone_id
        found = [f"state folder {folder}"] if folder.exists() else []
        keeper = self._keeper(clone_id)
        return found + ([f"keeper {keeper.pid}"] if keeper is not None else [])


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as output:
            output.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return output.read().decode(errors="replace")
    except OSError:
        return ""
