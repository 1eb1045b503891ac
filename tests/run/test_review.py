"""The built-in review stages: the toolchain (owner's code only) and the engine's self-review."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from shadowclone.plugin.types import ReviewContext
from shadowclone.run.review.self_review import SelfReviewStage
from shadowclone.run.review.toolchain import ToolchainStage


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    return path


def context(repo: Path, **changes: object) -> ReviewContext:
    base = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    values: dict[str, object] = {"workspace": repo, "base_ref": base, "owner_wrote": True}
    values.update(changes)
    return ReviewContext(**values)  # type: ignore[arg-type]


def test_toolchain_runs_the_check_commands_on_the_owners_code(repo: Path) -> None:
    stage = ToolchainStage()
    passed = stage.run(context(repo, check_commands=("test -f a.py", "echo ok")))
    assert passed.passed and passed.summary == "2 checks passed"
    failed = stage.run(context(repo, check_commands=("exit 3", "echo fine")))
    assert not failed.passed and "1 of 2 checks failed: exit 3" in failed.summary
    assert "(exit 3)" in failed.details


def test_toolchain_never_runs_code_the_owner_did_not_write(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = ToolchainStage().run(
        context(repo, owner_wrote=False, check_commands=(f"touch {marker}",))
    )
    assert result.passed and result.summary.startswith("skipped")
    assert not marker.exists()


def test_self_review_asks_the_engine_about_the_diff(repo: Path) -> None:
    ctx = context(repo)
    (repo / "a.py").write_text("x = 2\n")
    prompts: list[str] = []

    def consult(prompt: str) -> str:
        prompts.append(prompt)
        return "FAIL: x changed without a test\nAdd a test for x."

    result = SelfReviewStage().run(
        ReviewContext(
            workspace=ctx.workspace, base_ref=ctx.base_ref, owner_wrote=True, consult=consult
        )
    )
    assert not result.passed
    assert result.summary == "FAIL: x changed without a test"
    assert "-x = 1" in prompts[0] and "+x = 2" in prompts[0]


def test_self_review_passes_an_approving_answer_and_skips_an_empty_change(repo: Path) -> None:
    ctx = context(repo, consult=lambda prompt: "PASS: fine")
    assert SelfReviewStage().run(ctx).summary == "nothing to review: the change is empty"
    (repo / "b.py").write_text("y = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "b.py"], check=True)
    result = SelfReviewStage().run(ctx)
    assert result.passed and result.summary == "PASS: fine"
    assert SelfReviewStage().run(context(repo)).summary.startswith("skipped")


def test_self_review_of_someone_else_s_pull_request_reads_its_commits(repo: Path) -> None:
    """The work tree of a pull request the owner did not write holds the base's engine
    settings (run/engine_settings.py): the change reviewed is the commits', not the tree's."""
    ctx = context(repo, owner_wrote=False)
    git = ["git", "-C", str(repo), "-c", "user.name=s", "-c", "user.email=s@e"]
    (repo / "CLAUDE.md").write_text("the stranger's rules\n")
    subprocess.run([*git, "add", "CLAUDE.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "rules"], check=True)
    (repo / "CLAUDE.md").unlink()  # as the run program leaves it: the base has none
    prompts: list[str] = []

    def consult(prompt: str) -> str:
        prompts.append(prompt)
        return "PASS: fine"

    result = SelfReviewStage().run(
        ReviewContext(workspace=repo, base_ref=ctx.base_ref, owner_wrote=False, consult=consult)
    )
    assert result.passed
    assert "+the stranger's rules" in prompts[0]
