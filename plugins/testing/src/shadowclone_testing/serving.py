"""serve for tests: on a thread or in a process of its own, with test scripts for the fake
launcher's clones, and waiting with a generous bound."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from shadowclone.config import HOME_VARIABLE, Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, State
from shadowclone.plugin import Launcher
from shadowclone.plugin.node import LocalNode
from shadowclone.serve.loop import ServeSettings, serve_clones
from shadowclone_fake_launch.launcher import FakeLauncher
from shadowclone_fake_launch.scripts import (
    SCRIPTS_VARIABLE,
    Play,
    Script,
    ScriptsFile,
    write_scripts,
)

from shadowclone_testing.harness import make_home, set_up

WAIT_S = 30.0
"""Bound on every wait: long enough for a slow machine, short enough to end a hang."""

FAST = ServeSettings(stop_grace_s=2.0, kill_grace_s=2.0, status_poll_s=0.2, rescan_s=1.0)


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    """Return the first truthy value of `check()`, failing with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def record_of(paths: Paths, clone_id: str) -> Record | None:
    return RunFolder(paths.clones_dir / clone_id).record()


def state_of(paths: Paths, clone_id: str) -> State | None:
    record = record_of(paths, clone_id)
    return record.state if record else None


def wait_state(paths: Paths, clone_id: str, *states: State) -> Record:
    def reached() -> Record | None:
        record = record_of(paths, clone_id)
        return record if record is not None and record.state in states else None

    found: Record = wait_until(reached, f"clone {clone_id} to be {' or '.join(states)}")
    return found


def starts(log: Path) -> list[str]:
    """Clone ids, one per start of a player, from its start log."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line)["clone"] for line in lines if line.strip()]


@attrs.define
class Scripts:
    """The scripts file serve's fake launcher reads; tests set scripts per target."""

    path: Path
    start_log: Path
    default: Script | None = None
    targets: dict[str, Script] = attrs.field(factory=dict)

    def set(self, target: str, script: Script) -> None:
        self.targets[target] = script
        self.save()

    def save(self) -> None:
        write_scripts(self.path, ScriptsFile(dict(self.targets), self.default, str(self.start_log)))

    def starts(self) -> list[str]:
        return starts(self.start_log)


def remove_all(launcher: FakeLauncher) -> None:
    for status in launcher.running():
        launcher.remove(status.clone_id)


class ServeThread:
    """serve on a thread, as `shadowclone serve` runs it; `stop` leaves its clones running."""

    def __init__(
        self, node: LocalNode, settings: ServeSettings = FAST, launcher: Launcher | None = None
    ) -> None:
        self.node = node
        self.settings = settings
        self.launcher = launcher
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop = threading.Event()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(WAIT_S)
        self.raise_errors()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WAIT_S)
            assert not self._thread.is_alive(), "serve did not stop within its bound"
        self.raise_errors()

    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors[0]

    def _run(self, ready: threading.Event) -> None:
        try:
            serve_clones(
                self.node.config,
                self.node.paths,
                registry=self.node.registry,
                stop_event=self._stop,
                launcher=self.launcher,
                settings=self.settings,
                ready=ready,
            )
        except Exception as error:  # noqa: BLE001 - handed to the test by raise_errors
            self.errors.append(error)
        finally:
            ready.set()


@contextlib.contextmanager
def serving(
    node: LocalNode, settings: ServeSettings = FAST, launcher: Launcher | None = None
) -> Iterator[ServeThread]:
    serve = ServeThread(node, settings, launcher)
    serve.start()
    try:
        yield serve
    finally:
        serve.stop()


def make_serve_home(root: Path, parallel: int) -> tuple[Paths, dict[str, str]]:
    """A home for serve outside the `sc_home` fixture (one per hypothesis example): its paths,
    and the variables a serve process for it needs (echo clones by default)."""
    # Searchable by the engine's own user, which the fake launcher uses when run as root.
    root.chmod(root.stat().st_mode | 0o011)
    paths = make_home(root, ("parallel_clones", str(parallel)))
    set_up(paths)
    scripts = root / "scripts.json"
    write_scripts(
        scripts, ScriptsFile(default=Script(play=Play.ECHO), start_log=str(root / "starts.jsonl"))
    )
    return paths, {SCRIPTS_VARIABLE: str(scripts), HOME_VARIABLE: str(root)}


SERVE_PROGRAM = (
    "import sys\nfrom shadowclone.cli import main\nsys.exit(main(['serve', *sys.argv[1:]]))\n"
)
"""`shadowclone serve` in a new process of this Python."""


@attrs.define
class ServeProcess:
    """A real `shadowclone serve` process for a home; its stdout and stderr go to a file."""

    paths: Paths
    popen: subprocess.Popen[bytes]
    output_file: Path

    @classmethod
    def start(cls, paths: Paths, *args: str, env: dict[str, str] | None = None) -> ServeProcess:
        root = paths.clones_dir.parent
        root.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="serve-", suffix=".out", dir=root)
        environ = {**os.environ, HOME_VARIABLE: str(root), **(env or {})}
        with os.fdopen(fd, "wb") as output:
            popen = subprocess.Popen(
                [sys.executable, "-c", SERVE_PROGRAM, *args],
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        return cls(paths, popen, Path(name))

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def output(self) -> str:
        return self.output_file.read_text(encoding="utf-8", errors="replace")

    def wait_serving(self) -> None:
        """Until this serve has taken up the clones an earlier serve left."""
        mark = f"serve (pid {self.pid}) is running"

        def up() -> bool:
            if self.popen.poll() is not None:
                pytest.fail(f"serve exited {self.popen.returncode}: {self.output}")
            try:
                return mark in self.paths.serve_log.read_text(encoding="utf-8")
            except FileNotFoundError:
                return False

        wait_until(up, "serve to be running")

    def end(self, sig: int = signal.SIGTERM) -> int:
        """Signal it (if it still runs) and wait; its exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            return self.popen.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait(WAIT_S)
