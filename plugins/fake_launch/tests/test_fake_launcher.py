"""The fake launcher passes the launcher contract, and keeps its clones across a restart of
the process that launched them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin import Launcher, LaunchState
from shadowclone_testing.suites.launcher import (
    HANG_NOTE,
    PLAYER_SCRIPTS,
    WAIT_S,
    Behaviour,
    LauncherContract,
)

from shadowclone_fake_launch import keeper
from shadowclone_fake_launch.launcher import FakeLauncher
from shadowclone_fake_launch.scripts import (
    ScriptsFile,
    read_scripts,
    write_scripts,
)


def processes_of(state_folder: Path, clone_id: str) -> list[psutil.Process]:
    """The keeper (by its command line) and the clone (by its environment) of one clone."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            cmdline = process.info["cmdline"] or []
            if str(state_folder) in cmdline or (
                any("python" in part for part in cmdline[:1])
                and process.environ().get("SHADOWCLONE_CLONE_ID") == clone_id
            ):
                found.append(process)
        except psutil.Error:
            continue
    return [p for p in found if p.status() != psutil.STATUS_ZOMBIE]


class TestFakeLauncher(LauncherContract):
    secrets_read_only = False  # a local process of the owner's user; Docker mounts it read-only

    def make_launcher(self, root: Path) -> Launcher:
        return FakeLauncher(root / "fake-launch", root / "scripts.json")

    def arrange(self, root: Path, folder: RunFolder, behaviour: Behaviour) -> None:
        path = root / "scripts.json"
        scripts = read_scripts(path) if path.exists() else ScriptsFile()
        scripts.targets[folder.request().target.key] = PLAYER_SCRIPTS[behaviour]
        write_scripts(path, scripts)

    def traces(self, launcher: Launcher, clone_id: str) -> list[str]:
        assert isinstance(launcher, FakeLauncher)
        folder = launcher.clone_folder(clone_id)
        left = [f"state folder {folder}"] if folder.exists() else []
        return left + [f"process {p.pid}" for p in processes_of(folder, clone_id)]


def wait_for_note(run_folder: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while HANG_NOTE not in TestFakeLauncher().notes(run_folder):
        assert time.monotonic() < deadline, "the clone never got ready"
        time.sleep(0.05)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


def test_a_clone_outlives_the_process_that_launched_it(root: Path) -> None:
    """serve may be killed at any moment: its clones go on, and a new launcher finds them."""
    contract = TestFakeLauncher()
    spec = contract.spec(root, Behaviour.HANG, 1)
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from shadowclone.plugin import LaunchSpec\n"
        "from shadowclone_fake_launch.launcher import FakeLauncher\n"
        "root = Path(sys.argv[1])\n"
        "FakeLauncher(root / 'fake-launch', root / 'scripts.json').launch(\n"
        "    LaunchSpec(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), 'img'))\n"
        "import os, signal\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            program,
            str(root),
            spec.clone_id,
            str(spec.run_folder),
            str(spec.secrets_file),
        ],
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL
    launcher = contract.make_launcher(root)
    try:
        assert launcher.status(spec.clone_id).state is LaunchState.RUNNING
        wait_for_note(spec.run_folder)
        launcher.stop(spec.clone_id, grace_s=10)
        status = launcher.status(spec.clone_id)
        assert (status.state, status.exit_code) == (LaunchState.EXITED, 0)
    finally:
        launcher.remove(spec.clone_id)


def test_a_clone_whose_keeper_died_is_still_found_and_ends_with_an_unknown_code(
    root: Path,
) -> None:
    contract = TestFakeLauncher()
    launcher = contract.make_launcher(root)
    clone_id = contract.launched(launcher, root, Behaviour.HANG, 1)
    assert isinstance(launcher, FakeLauncher)
    folder = launcher.clone_folder(clone_id)
    try:
        keepers = [p for p in processes_of(folder, clone_id) if str(folder) in p.cmdline()]
        assert len(keepers) == 1
        keepers[0].kill()
        keepers[0].wait(WAIT_S)
        assert launcher.status(clone_id).state is LaunchState.RUNNING  # the clone itself lives
        launcher.stop(clone_id, grace_s=10)
        status = launcher.status(clone_id)
        assert (status.state, status.exit_code) == (LaunchState.EXITED, None)
        assert "exit code is unknown" in status.output_tail
    finally:
        launcher.remove(clone_id)
    assert contract.traces(launcher, clone_id) == []


def test_a_launch_that_died_before_its_keeper_counts_as_missing_and_may_be_retried(
    root: Path,
) -> None:
    contract = TestFakeLauncher()
    launcher = contract.make_launcher(root)
    assert isinstance(launcher, FakeLauncher)
    spec = contract.spec(root, Behaviour.FINISH, 1)
    folder = launcher.clone_folder(spec.clone_id)
    folder.mkdir(parents=True)
    (folder / keeper.LOCK_FILE).touch()  # what a launch leaves if killed before its keeper
    assert launcher.status(spec.clone_id).state is LaunchState.MISSING
    assert launcher.running() == []
    launcher.launch(spec)
    try:
        assert contract.exited(launcher, spec.clone_id).exit_code == 0
    finally:
        launcher.remove(spec.clone_id)


def test_the_clone_sees_its_own_home_and_only_a_few_host_variables(root: Path) -> None:
    import json

    contract = TestFakeLauncher()
    launcher = contract.make_launcher(root)
    os.environ["SHADOWCLONE_TEST_HOST_ONLY"] = "1"
    try:
        clone_id = contract.launched(launcher, root, Behaviour.PROBE, 1)
    finally:
        del os.environ["SHADOWCLONE_TEST_HOST_ONLY"]
    try:
        contract.exited(launcher, clone_id)
        final = contract.final(root / "clones" / clone_id)
        assert final is not None and final.report is not None
        seen = json.loads(final.report)
        assert "SHADOWCLONE_TEST_HOST_ONLY" not in seen["env"]
        assert seen["env"]["SHADOWCLONE_RUN_FOLDER"] == str(root / "clones" / clone_id)
        assert Path(seen["env"]["HOME"]).is_relative_to(root / "fake-launch")
        assert seen["cwd"] == seen["env"]["HOME"]
    finally:
        launcher.remove(clone_id)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives the engine a user of its own")
def test_a_python_the_engine_cannot_reach_runs_it_unisolated_and_changes_no_mode(
    tmp_path: Path,
) -> None:
    """Run as root with a Python under a folder closed to other users (one under root's home):
    the clone's engine runs as the run program does, and no folder's mode is changed to let the
    engine's user in."""
    from shadowclone.plugin import LaunchSpec

    from shadowclone_fake_launch.launcher import _clone_env

    closed = tmp_path / "closed"
    (closed / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    python = closed / "bin" / "python"
    python.write_text("#!/bin/sh\n")  # only its folder matters here
    (tmp_path / "run").mkdir()
    modes = {folder: folder.stat().st_mode for folder in (closed, *closed.parents)}
    spec = LaunchSpec(
        clone_id="261206-000000-test",
        run_folder=tmp_path / "run",
        secrets_file=tmp_path / "secrets.toml",
        image="unused",
    )
    env = _clone_env(spec, tmp_path / "home", str(python))
    assert "SHADOWCLONE_ENGINE_USER" not in env
    opened = _clone_env(spec, tmp_path / "home", sys.executable)
    assert "SHADOWCLONE_ENGINE_USER" in opened  # (the project's Python is open in tests)
    assert {folder: folder.stat().st_mode for folder in modes} == modes
