"""The example launcher passes the launcher contract of shadowclone-testing, run from an
installed kit as a third party runs it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from shadowclone.plugin import Launcher, LaunchSpec, LaunchState
from shadowclone_example.launcher import LocalLauncher
from shadowclone_fake_launch.scripts import script_json
from shadowclone_testing.suites.launcher import (
    PLAYER_SCRIPTS,
    Behaviour,
    LauncherContract,
    RunFolder,
)

SCRIPT_FILE = "contract-script.json"


def play_script(spec: LaunchSpec) -> list[str]:
    return [
        sys.executable,
        "-m",
        "shadowclone_fake_launch.player",
        str(spec.run_folder / SCRIPT_FILE),
    ]


class TestLocalLauncher(LauncherContract):
    secrets_read_only = False  # a local process of the owner's user reads the file itself

    def make_launcher(self, root: Path) -> Launcher:
        return LocalLauncher(root / "local", command_for=play_script)

    def arrange(self, root: Path, folder: RunFolder, behaviour: Behaviour) -> None:
        script = folder.path / SCRIPT_FILE
        script.write_text(script_json(PLAYER_SCRIPTS[behaviour], None), encoding="utf-8")

    def traces(self, launcher: Launcher, clone_id: str) -> list[str]:
        assert isinstance(launcher, LocalLauncher)
        return launcher.traces(clone_id)


def test_a_launch_that_died_before_its_keeper_is_exited_then_reaped(tmp_path: Path) -> None:
    launcher = LocalLauncher(tmp_path / "local", launch_grace_s=0.2)
    dead = tmp_path / "local" / "260101-000000-dead"
    dead.mkdir(parents=True)  # all a launch left that died before its keeper started
    assert launcher.status("260101-000000-dead").state is LaunchState.RUNNING  # still starting
    time.sleep(0.3)
    assert launcher.status("260101-000000-dead").state is LaunchState.EXITED
    assert launcher.reap_strays() == [
        f"the half-made launch {tmp_path / 'local' / '260101-000000-dead'}"
    ]
    assert launcher.status("260101-000000-dead").state is LaunchState.MISSING
