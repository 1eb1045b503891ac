"""Every built-in review stage keeps the review stage contract of the testing kit.

One test class per stage the built-in plugins register, so that a new built-in stage is held to
the contract without a line here: each is given check commands that fail and an engine that
answers FAIL when the suite asks for a flaw, commands that pass and an engine that answers PASS
otherwise.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from shadowclone.plugin import (
    Family,
    ReviewContext,
    ReviewResult,
    ReviewStage,
    ReviewStageRegistration,
)
from shadowclone.plugin.manager import load_registry
from shadowclone_testing.suites.review_stage import ReviewStageContract

REGISTRY = load_registry(entry_points=())
NAMES = REGISTRY.names(Family.REVIEW_STAGE)


class BuiltinStage(ReviewStageContract):
    stage_name = ""

    def make_registration(self) -> ReviewStageRegistration:
        found = [r for r in REGISTRY.review_stages() if r.name == self.stage_name]
        assert len(found) == 1
        return found[0]

    def make_context(self, workspace: Path, base_ref: str, *, flawed: bool) -> ReviewContext:
        def answer(prompt: str) -> str:
            assert base_ref[:12] in prompt, "the engine is told the base"
            return "FAIL: the contract planted a flaw\nthe details" if flawed else "PASS\nfine"

        return ReviewContext(
            workspace=workspace,
            base_ref=base_ref,
            owner_wrote=True,
            check_commands=("true", "exit 1") if flawed else ("true",),
            consult=answer,
        )


def _suite(name: str) -> type[BuiltinStage]:
    title = "TestReviewStage_" + name.replace("-", "_")
    return type(title, (BuiltinStage,), {"stage_name": name, "__qualname__": title})


for _name in NAMES:
    globals()["TestReviewStage_" + _name.replace("-", "_")] = _suite(_name)


def test_the_built_in_stages_are_all_held_to_the_contract() -> None:
    assert {"toolchain", "self-review"} <= set(NAMES)
    for name in NAMES:
        assert "TestReviewStage_" + name.replace("-", "_") in globals()


class Careless:
    """A stage that breaks the contract: it names another stage."""

    def run(self, context: ReviewContext) -> ReviewResult:
        return ReviewResult("someone-else", False, "fine")


class Silent:
    """A stage that breaks the contract: it never finds anything, and says so in two lines."""

    def run(self, context: ReviewContext) -> ReviewResult:
        return ReviewResult("broken", True, "fine\nreally")


class Fragile:
    """A stage that breaks the contract: a file name it did not expect makes it raise."""

    def run(self, context: ReviewContext) -> ReviewResult:
        names = subprocess.run(
            ["git", "diff", "--name-only", "-z", context.base_ref],
            cwd=context.workspace,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\0")
        for name in filter(None, names):
            if not re.fullmatch(r"[\w.]+", name, re.ASCII):
                raise ValueError(f"cannot review {name!r}")
        return ReviewResult("broken", not context.check_commands, "looked")


def broken(stage: Callable[[], ReviewStage]) -> ReviewStageContract:
    class Broken(ReviewStageContract):
        def make_registration(self) -> ReviewStageRegistration:
            return ReviewStageRegistration(name="broken", summary="breaks", factory=stage)

        def make_context(self, workspace: Path, base_ref: str, *, flawed: bool) -> ReviewContext:
            commands = ("false",) if flawed else ()
            return ReviewContext(workspace, base_ref, owner_wrote=True, check_commands=commands)

    return Broken()


@pytest.mark.parametrize(
    ("stage", "test"),
    [
        (Careless, "test_an_empty_change_passes"),
        (Silent, "test_a_flaw_fails_the_stage_with_one_line"),
        (Silent, "test_a_sound_change_passes"),
    ],
)
def test_the_suite_catches_a_stage_that_breaks_the_contract(
    stage: Callable[[], ReviewStage], test: str, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError):
        getattr(broken(stage), test)(tmp_path)


def test_the_suite_catches_a_stage_that_odd_file_names_break() -> None:
    with pytest.raises(AssertionError, match="the stage raised"):
        broken(Fragile).test_odd_file_names_never_break_the_stage()
