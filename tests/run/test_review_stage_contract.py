"""Every built-in review stage keeps the review stage contract of the testing kit.

One test class per stage the built-in plugins register, so that a new built-in stage is held to
the contract without a line here: each is given check commands that fail and an engine that
answers FAIL when the suite asks for a flaw, commands that pass and an engine that answers PASS
otherwise.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from shadowclone.plugin import Family, ReviewContext, ReviewResult, ReviewStageRegistration
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
    """A stage that breaks the contract: it names another stage and says nothing it finds."""

    def run(self, context: ReviewContext) -> ReviewResult:
        subprocess.run(["git", "diff", context.base_ref], cwd=context.workspace, check=True)
        return ReviewResult("someone-else", True, "fine\nreally")


class CarelessStage(ReviewStageContract):
    def make_registration(self) -> ReviewStageRegistration:
        return ReviewStageRegistration(name="careless", summary="breaks", factory=Careless)

    def make_context(self, workspace: Path, base_ref: str, *, flawed: bool) -> ReviewContext:
        return ReviewContext(workspace=workspace, base_ref=base_ref, owner_wrote=True)


@pytest.mark.parametrize(
    "test", ["test_an_empty_change_passes", "test_a_flaw_fails_the_stage_with_one_line"]
)
def test_the_suite_catches_a_stage_that_breaks_the_contract(test: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        getattr(CarelessStage(), test)(tmp_path)
