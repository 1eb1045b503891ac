"""Running the review stages after the engine: each installed stage in order, one line of
progress each; a stage that would run code the owner did not write is skipped, a stage that
breaks fails alone, and a stop skips the rest."""

from __future__ import annotations

import asyncio

import attrs

from shadowclone.node.schemas import ProgressKind, ProgressLine, Step
from shadowclone.plugin.types import ReviewContext, ReviewStageRegistration
from shadowclone.run.carry import ReviewLine
from shadowclone.run.progress import ProgressWriter


@attrs.frozen
class Reviewed:
    lines: list[ReviewLine]
    failed_checks: list[str]
    """What each failed code-running stage said, for the engine's next round of fixes."""


def write_review_line(progress: ProgressWriter, line: ReviewLine) -> None:
    verdict = "passed" if line.passed else "failed"
    progress.write(
        ProgressLine(Step.REVIEW, ProgressKind.REVIEW, f"{line.stage}: {verdict}: {line.summary}")
    )


async def run_review_stages(
    stages: list[ReviewStageRegistration],
    context: ReviewContext,
    progress: ProgressWriter,
    stop: asyncio.Event,
) -> Reviewed:
    lines: list[ReviewLine] = []
    failed_checks: list[str] = []
    for stage in stages:
        if stop.is_set():
            progress.note(Step.REVIEW, "stop requested: skipping the remaining reviews")
            break
        if stage.runs_code and not context.owner_wrote:
            skipped = "skipped: it would run code the owner did not write"
            write_review_line(progress, ReviewLine(stage.name, True, skipped))
            continue
        try:
            result = await asyncio.to_thread(stage.factory().run, context)
            line = ReviewLine(stage.name, result.passed, result.summary)
            if stage.runs_code and not result.passed:
                failed_checks.append(result.details or result.summary)
        except Exception as error:  # noqa: BLE001 - one broken stage must not sink the clone
            line = ReviewLine(stage.name, False, f"the stage broke: {error!r}")
        write_review_line(progress, line)
        lines.append(line)
    return Reviewed(lines, failed_checks)
