"""The launcher contract: tests every launcher plugin passes.

A launcher's tests subclass `LauncherContract` and say how to build the launcher, how to make a
clone behave a certain way, and what the launcher leaves behind for a clone:

    class TestDockerLauncher(LauncherContract):
        def make_launcher(self, root): ...
        def arrange(self, root, folder, behaviour): ...
        def traces(self, launcher, clone_id): ...

The clone programs behave as `Behaviour` says; the fake launcher gets them from its test
scripts (`shadowclone_fake_launch.player`), another launcher may run the same player in its
image.
"""

from __future__ import annotations

import abc
import enum
import ipaddress
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from shadowclone import contract
from shadowclone.errors import Refused
from shadowclone.node.ids import new_clone_id
from shadowclone.node.runfolder import RunFolder as RunFolder  # noqa: PLC0414 - `arrange` gets one
from shadowclone.node.schemas import ProgressKind, ProgressLine, Request
from shadowclone.node.target import Target
from shadowclone.plugin import CloneStatus, Launcher, LaunchSpec, LaunchState, Outcome
from shadowclone_fake_launch.scripts import Play, Script, script_json

WAIT_S = 30.0
"""Bound on every wait, so that a broken launcher fails instead of hanging."""

FAIL_OUTPUT = "contract output 7f3a"
FAIL_EXIT_CODE = 3
HANG_NOTE = "hanging until stopped"
"""The progress line a hanging clone writes once it is ready to be stopped."""
SECRET = "sk-contract-5e1b9d"
MARK_VARIABLE = "SHADOWCLONE_CONTRACT_MARK"
MARK = "mark-7c21"
"""A variable of the spec's `env`, which the clone must find in its environment."""
SCRIPT_FILE = "contract-script.json"
"""Where `write_script` leaves the script a containerised clone plays, in its run folder."""


def write_script(folder: RunFolder, behaviour: Behaviour) -> None:
    """For a launcher that runs the clone image: the script of `behaviour`, in the run folder,
    for `play_script` to play (an `arrange`)."""
    script = folder.path / SCRIPT_FILE
    script.write_text(script_json(PLAYER_SCRIPTS[behaviour], None), encoding="utf-8")


def play_script(spec: LaunchSpec) -> list[str] | None:
    """The command of a clone whose run folder holds a script (`write_script`): the image's
    player plays it, in the run folder where a container mounts it."""
    if not (spec.run_folder / SCRIPT_FILE).exists():
        return None
    return [
        "python",
        "-m",
        "shadowclone_fake_launch.player",
        f"{contract.CONTAINER_RUN_FOLDER}/{SCRIPT_FILE}",
    ]


class Behaviour(enum.Enum):
    FINISH = "finish"
    """A few progress lines, a final line `done`, exit 0."""
    FAIL = "fail"
    """Prints FAIL_OUTPUT and exits FAIL_EXIT_CODE with no final line."""
    HANG = "hang"
    """Writes HANG_NOTE, then runs until asked to end; then a final line `stopped`, exit 0."""
    STUBBORN = "stubborn"
    """Writes HANG_NOTE and ignores every request to end: only force ends it."""
    PROBE = "probe"
    """Final line `done` whose report is JSON: `env` (its environment), `secrets_text` (what
    it read at SHADOWCLONE_SECRETS_FILE), after trying to append to that file."""


PLAYER_SCRIPTS: dict[Behaviour, Script] = {
    Behaviour.FINISH: Script(play=Play.FINISH),
    Behaviour.FAIL: Script(play=Play.NO_FINAL, exit_code=FAIL_EXIT_CODE, output=FAIL_OUTPUT),
    Behaviour.HANG: Script(play=Play.HANG),
    Behaviour.STUBBORN: Script(play=Play.HANG, ignore_stop=True),
    Behaviour.PROBE: Script(play=Play.PROBE),
}
"""The test scripts of the kit's player (`python -m shadowclone_fake_launch.player SCRIPT`) that
behave as each `Behaviour` says: a launcher under test may run the player instead of the run
program, with the script `arrange` leaves."""


def _wait(check: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


class LauncherContract(abc.ABC):
    """What serve relies on from any launcher."""

    image = "shadowclone-contract:test"
    secrets_read_only = True
    """Whether the clone's view of the secrets file is read-only (a read-only mount); a launcher
    that runs clones as the owner's own processes cannot promise it and says so."""

    # ------------------------------------------------------------------ what a plugin provides

    @abc.abstractmethod
    def make_launcher(self, root: Path) -> Launcher:
        """A launcher whose clones belong to `root`: two launchers made for one root see the
        same clones (as serve does after a restart)."""

    @abc.abstractmethod
    def arrange(self, root: Path, folder: RunFolder, behaviour: Behaviour) -> None:
        """Make the clone of `folder` (its request is written) behave as `behaviour` says."""

    @abc.abstractmethod
    def traces(self, launcher: Launcher, clone_id: str) -> list[str]:
        """Everything the launcher still keeps of the clone (processes, containers, files),
        one description each; [] when nothing is left."""

    # ------------------------------------------------------------------ fixtures and helpers

    @pytest.fixture
    def root(self, tmp_path: Path) -> Path:
        return tmp_path

    @pytest.fixture
    def launcher(self, root: Path) -> Iterator[Launcher]:
        launcher = self.make_launcher(root)
        launcher.check()
        yield launcher
        cleaner = self.make_launcher(root)
        for status in cleaner.running():
            cleaner.remove(status.clone_id)

    def secrets_file(self, root: Path) -> Path:
        path = root / "secrets.toml"
        if not path.exists():
            path.write_text(f'anthropic_api_key = "{SECRET}"\n', encoding="utf-8")
            path.chmod(0o600)
        return path

    def spec(self, root: Path, behaviour: Behaviour, number: int) -> LaunchSpec:
        at = datetime.now(UTC)
        clone_id = new_clone_id(at)
        folder = RunFolder(root / "clones" / clone_id)
        folder.path.mkdir(parents=True)
        folder.write_request(
            Request(
                id=clone_id,
                target=Target("contract", "app", number),
                engine="scripted",
                login="no-login",
                launcher="under-test",
                image=self.image,
                github_url="https://github.com",
                github_api_url="https://api.github.com",
                requested_at=at,
            )
        )
        self.arrange(root, folder, behaviour)
        return LaunchSpec(
            clone_id=clone_id,
            run_folder=folder.path,
            secrets_file=self.secrets_file(root),
            image=self.image,
            labels={"shadowclone.clone": clone_id, "shadowclone.target": f"contract/app#{number}"},
            env={MARK_VARIABLE: MARK},
        )

    def launched(self, launcher: Launcher, root: Path, behaviour: Behaviour, number: int) -> str:
        spec = self.spec(root, behaviour, number)
        launcher.launch(spec)
        found = launcher.status(spec.clone_id).state
        assert found in (LaunchState.RUNNING, LaunchState.EXITED), "a launched clone is known"
        if behaviour in (Behaviour.HANG, Behaviour.STUBBORN):
            _wait(lambda: HANG_NOTE in self.notes(spec.run_folder), f"{behaviour} to be ready")
        return spec.clone_id

    def exited(self, launcher: Launcher, clone_id: str) -> CloneStatus:
        found: list[CloneStatus] = []

        def ended() -> bool:
            found[:] = [launcher.status(clone_id)]
            return found[0].state is LaunchState.EXITED

        _wait(ended, f"clone {clone_id} to exit")
        return found[0]

    def progress(self, run_folder: Path) -> list[ProgressLine]:
        lines, _, _ = RunFolder(run_folder).progress()
        return lines

    def notes(self, run_folder: Path) -> list[str]:
        return [line.text for line in self.progress(run_folder) if line.kind is ProgressKind.NOTE]

    def final(self, run_folder: Path) -> ProgressLine | None:
        return next((line for line in self.progress(run_folder) if line.final), None)

    def folder_of(self, root: Path, clone_id: str) -> Path:
        return root / "clones" / clone_id

    # ------------------------------------------------------------------ the contract

    def test_an_unknown_clone_is_missing_and_harmless(self, launcher: Launcher) -> None:
        assert launcher.status("200101-000000-none").state is LaunchState.MISSING
        launcher.stop("200101-000000-none", grace_s=0)
        launcher.remove("200101-000000-none")

    def test_it_names_the_address_where_clones_reach_this_machine(self, launcher: Launcher) -> None:
        ipaddress.ip_address(launcher.host_address())

    def test_a_spec_with_no_environment_is_prepared_as_it_is(
        self, launcher: Launcher, root: Path
    ) -> None:
        spec = self.spec(root, Behaviour.FINISH, 1)
        said: list[str] = []
        assert launcher.prepare(spec, said.append, threading.Event()) == spec
        assert said == []
        assert launcher.status(spec.clone_id).state is LaunchState.MISSING  # nothing launched

    def test_a_clone_works_in_its_run_folder_and_exits_0(
        self, launcher: Launcher, root: Path
    ) -> None:
        clone_id = self.launched(launcher, root, Behaviour.FINISH, 1)
        status = self.exited(launcher, clone_id)
        assert status.exit_code == 0
        final = self.final(self.folder_of(root, clone_id))
        assert final is not None and final.outcome is Outcome.DONE

    def test_a_clone_that_fails_reports_its_exit_code_and_last_output(
        self, launcher: Launcher, root: Path
    ) -> None:
        clone_id = self.launched(launcher, root, Behaviour.FAIL, 1)
        status = self.exited(launcher, clone_id)
        assert status.exit_code == FAIL_EXIT_CODE
        assert FAIL_OUTPUT in status.output_tail
        assert self.final(self.folder_of(root, clone_id)) is None

    def test_a_running_clone_stays_running_until_stopped_and_ends_gracefully(
        self, launcher: Launcher, root: Path
    ) -> None:
        clone_id = self.launched(launcher, root, Behaviour.HANG, 1)
        time.sleep(0.5)
        assert launcher.status(clone_id).state is LaunchState.RUNNING
        started = time.monotonic()
        launcher.stop(clone_id, grace_s=20)
        assert time.monotonic() - started < 20 + WAIT_S
        assert launcher.status(clone_id).state is LaunchState.EXITED
        final = self.final(self.folder_of(root, clone_id))
        assert final is not None and final.outcome is Outcome.STOPPED, "it had time to save"

    def test_stop_forces_a_clone_that_ignores_it(self, launcher: Launcher, root: Path) -> None:
        clone_id = self.launched(launcher, root, Behaviour.STUBBORN, 1)
        started = time.monotonic()
        launcher.stop(clone_id, grace_s=1)
        assert time.monotonic() - started < 1 + WAIT_S
        status = launcher.status(clone_id)
        assert status.state is LaunchState.EXITED
        assert status.exit_code not in (None, 0)
        assert self.final(self.folder_of(root, clone_id)) is None

    def test_a_fresh_launcher_finds_the_clones_by_label(
        self, launcher: Launcher, root: Path
    ) -> None:
        hanging = [self.launched(launcher, root, Behaviour.HANG, n) for n in (1, 2)]
        finished = self.launched(launcher, root, Behaviour.FINISH, 3)
        self.exited(launcher, finished)
        fresh = self.make_launcher(root)  # as serve after a restart
        found = {status.clone_id: status.state for status in fresh.running()}
        assert found == {
            hanging[0]: LaunchState.RUNNING,
            hanging[1]: LaunchState.RUNNING,
            finished: LaunchState.EXITED,
        }
        fresh.stop(hanging[0], grace_s=10)
        assert launcher.status(hanging[0]).state is LaunchState.EXITED
        fresh.remove(finished)
        assert {s.clone_id for s in launcher.running()} == set(hanging)

    def test_a_clone_is_never_launched_twice(self, launcher: Launcher, root: Path) -> None:
        spec = self.spec(root, Behaviour.HANG, 1)
        launcher.launch(spec)
        with pytest.raises(Refused):
            launcher.launch(spec)
        with pytest.raises(Refused):
            self.make_launcher(root).launch(spec)
        _wait(lambda: HANG_NOTE in self.notes(spec.run_folder), "the clone to be ready")
        time.sleep(0.5)
        assert self.notes(spec.run_folder).count(HANG_NOTE) == 1

    def test_remove_leaves_nothing_behind(self, launcher: Launcher, root: Path) -> None:
        running = self.launched(launcher, root, Behaviour.HANG, 1)
        ended = self.launched(launcher, root, Behaviour.FINISH, 2)
        self.exited(launcher, ended)
        assert self.traces(launcher, running), "a running clone leaves traces to look for"
        assert self.traces(launcher, ended), "so does an exited one until it is removed"
        for clone_id in (running, ended):
            launcher.remove(clone_id)
            assert launcher.status(clone_id).state is LaunchState.MISSING
            assert self.traces(launcher, clone_id) == []
        assert launcher.running() == []

    def test_the_secrets_file_is_readable_read_only_and_never_in_the_environment(
        self, launcher: Launcher, root: Path
    ) -> None:
        secrets = self.secrets_file(root)
        before = secrets.read_bytes()
        clone_id = self.launched(launcher, root, Behaviour.PROBE, 1)
        assert self.exited(launcher, clone_id).exit_code == 0
        final = self.final(self.folder_of(root, clone_id))
        assert final is not None and final.report is not None
        seen = json.loads(final.report)
        assert seen["secrets_text"] is not None and SECRET in seen["secrets_text"]
        if self.secrets_read_only:
            assert secrets.read_bytes() == before, "the clone changed the owner's secrets file"
        leaked = [name for name, value in seen["env"].items() if SECRET in value]
        assert leaked == [], f"secret in the clone's environment: {leaked}"
        assert seen["env"].get("SHADOWCLONE_RUN_FOLDER"), "the clone is told its run folder"
        assert seen["env"].get(MARK_VARIABLE) == MARK, "the spec's env reaches the clone"
