"""The built-in review stages, which run inside the clone after the engine."""

from __future__ import annotations

from collections.abc import Iterator

from shadowclone.plugin import hookimpl
from shadowclone.plugin.types import ReviewStage, ReviewStageRegistration


def _toolchain() -> ReviewStage:
    from shadowclone.run.review.toolchain import ToolchainStage

    return ToolchainStage()


def _self_review() -> ReviewStage:
    from shadowclone.run.review.self_review import SelfReviewStage

    return SelfReviewStage()


@hookimpl
def shadowclone_review_stages() -> Iterator[ReviewStageRegistration]:
    yield ReviewStageRegistration(
        name="toolchain",
        summary="runs the repository's check commands (only on the owner's own work)",
        factory=_toolchain,
        order=10,
        runs_code=True,
    )
    yield ReviewStageRegistration(
        name="self-review",
        summary="the engine reviews its own diff in a fresh session, with web tools off",
        factory=_self_review,
        order=20,
    )
