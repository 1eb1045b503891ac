"""The review stage contract: tests every review stage passes.

A review stage's tests subclass `ReviewStageContract` and say how to get the stage's
registration and what context makes it find something:

    class TestMyStage(ReviewStageContract):
        def make_registration(self): ...
        def make_context(self, workspace, base_ref, *, flawed): ...

The suite makes the workspaces itself: git repositories whose base commit is `base_ref`, with
an empty change, a change of odd file names, or no history at all beyond the base.
"""

from __future__ import annotations

import abc
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.plugin import ReviewContext, ReviewResult, ReviewStageRegistration
from shadowclone.plugin.types import NAME_PATTERN

SHARED = [HealthCheck.differing_executors]
"""One suite runs for many plugins, each subclass an executor of its own."""

WAIT_S = 60.0
"""Bound on one run of a stage, so that a stage that hangs fails instead."""

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "contract",
    "GIT_AUTHOR_EMAIL": "contract@example.invalid",
    "GIT_COMMITTER_NAME": "contract",
    "GIT_COMMITTER_EMAIL": "contract@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

ODD_NAMES = st.text(
    st.characters(exclude_characters="/\0", exclude_categories=["Cs"]),
    min_size=1,
    max_size=40,
).filter(lambda name: name not in (".", "..", ".git") and len(name.encode()) < 200)
"""File names git can hold: spaces, quotes, newlines, dashes first, any script."""


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=workspace,
        env={**os.environ, **_GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def make_workspace(workspace: Path) -> str:
    """A repository with one commit, the base; returns its id."""
    workspace.mkdir(parents=True, exist_ok=True)
    git(workspace, "init", "--quiet", "--initial-branch=main")
    (workspace / "README.md").write_text("# contract\n", encoding="utf-8")
    git(workspace, "add", "--all")
    git(workspace, "commit", "--quiet", "--message=base")
    return git(workspace, "rev-parse", "HEAD")


def commit_change(workspace: Path, files: dict[str, str]) -> None:
    """Write `files` and commit them, as the run program commits the owner's work."""
    for name, text in files.items():
        (workspace / name).write_text(text, encoding="utf-8")
    git(workspace, "add", "--all")
    git(workspace, "commit", "--quiet", "--message=change")


class ReviewStageContract(abc.ABC):
    """What the run program relies on from any review stage."""

    # ------------------------------------------------------------------ what a plugin provides

    @abc.abstractmethod
    def make_registration(self) -> ReviewStageRegistration:
        """The stage's registration, as its plugin's hook yields it."""

    @abc.abstractmethod
    def make_context(self, workspace: Path, base_ref: str, *, flawed: bool) -> ReviewContext:
        """A context on `workspace` (its change is `git diff base_ref`) where the stage finds
        something exactly when `flawed`: check commands that fail, an engine (`consult`) that
        answers FAIL... A stage with `runs_code` is given `owner_wrote=True`."""

    # ------------------------------------------------------------------ helpers

    def run_stage(self, context: ReviewContext) -> ReviewResult:
        """One run of the stage, on a thread as the run program runs it, within WAIT_S."""
        registration = self.make_registration()
        found: list[ReviewResult | BaseException] = []

        def work() -> None:
            try:
                found.append(registration.factory().run(context))
            except BaseException as error:  # noqa: BLE001 - reported below
                found.append(error)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(WAIT_S)
        assert not thread.is_alive(), f"the stage ran past {WAIT_S:.0f} s"
        result = found[0]
        if isinstance(result, BaseException):
            raise AssertionError(f"the stage raised {result!r}") from result
        assert isinstance(result, ReviewResult), f"the stage returned {result!r}"
        assert result.stage == registration.name, "a result names its stage"
        assert isinstance(result.passed, bool)
        assert result.summary.strip() and "\n" not in result.summary, (
            f"the summary is one non-empty line: {result.summary!r}"
        )
        return result

    # ------------------------------------------------------------------ the contract

    def test_the_registration_is_valid(self) -> None:
        registration = self.make_registration()
        assert isinstance(registration, ReviewStageRegistration)
        assert NAME_PATTERN.match(registration.name)
        assert registration.summary.strip() and "\n" not in registration.summary
        assert isinstance(registration.order, int) and not isinstance(registration.order, bool)
        assert callable(registration.factory)

    def test_an_empty_change_passes(self, tmp_path: Path) -> None:
        base = make_workspace(tmp_path / "work")
        result = self.run_stage(self.make_context(tmp_path / "work", base, flawed=False))
        assert result.passed, result.summary

    def test_a_workspace_with_no_history_beyond_its_base_is_reviewed_without_error(
        self, tmp_path: Path
    ) -> None:
        """The base is the root commit and the only one: no parent to diff against."""
        base = make_workspace(tmp_path / "work")
        (tmp_path / "work" / "new.txt").write_text("not committed\n", encoding="utf-8")
        self.run_stage(self.make_context(tmp_path / "work", base, flawed=False))

    def test_a_sound_change_passes(self, tmp_path: Path) -> None:
        base = make_workspace(tmp_path / "work")
        commit_change(tmp_path / "work", {"hello.py": "print('hello')\n"})
        result = self.run_stage(self.make_context(tmp_path / "work", base, flawed=False))
        assert result.passed, result.summary

    def test_a_flaw_fails_the_stage_with_one_line(self, tmp_path: Path) -> None:
        base = make_workspace(tmp_path / "work")
        commit_change(tmp_path / "work", {"hello.py": "print('hello'\n"})
        result = self.run_stage(self.make_context(tmp_path / "work", base, flawed=True))
        assert not result.passed, f"the stage found nothing: {result.summary!r}"

    def test_the_stage_leaves_the_history_and_the_index_as_they_were(self, tmp_path: Path) -> None:
        work = tmp_path / "work"
        base = make_workspace(work)
        commit_change(work, {"hello.py": "print('hello')\n"})
        (work / "staged.txt").write_text("staged\n", encoding="utf-8")
        git(work, "add", "staged.txt")
        before = (git(work, "rev-parse", "HEAD"), git(work, "diff", "--cached", "--name-only"))
        for flawed in (False, True):
            self.run_stage(self.make_context(work, base, flawed=flawed))
        after = (git(work, "rev-parse", "HEAD"), git(work, "diff", "--cached", "--name-only"))
        assert after == before

    def test_a_stage_that_runs_code_runs_none_the_owner_did_not_write(self, tmp_path: Path) -> None:
        """The run program skips such a stage; should it run anyway, it fails nothing. Any
        stage reviews a stranger's change without breaking."""
        registration = self.make_registration()
        base = make_workspace(tmp_path / "work")
        commit_change(tmp_path / "work", {"hello.py": "print('hello'\n"})
        context = self.make_context(tmp_path / "work", base, flawed=True)
        result = self.run_stage(attrs.evolve(context, owner_wrote=False))
        if registration.runs_code:
            assert result.passed, "it ran the stranger's code or judged it"

    @settings(
        max_examples=8,
        deadline=None,
        suppress_health_check=[*SHARED, HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(names=st.lists(ODD_NAMES, min_size=1, max_size=3, unique_by=str.casefold))
    def test_odd_file_names_never_break_the_stage(self, names: list[str]) -> None:
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder) / "work"
            base = make_workspace(work)
            try:
                commit_change(work, {name: f"{name}\n" for name in names})
            except (OSError, subprocess.CalledProcessError, UnicodeEncodeError):
                return  # a name this file system or git cannot hold: nothing to review
            for flawed in (False, True):
                self.run_stage(self.make_context(work, base, flawed=flawed))
