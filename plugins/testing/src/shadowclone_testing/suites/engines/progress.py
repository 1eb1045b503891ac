"""Reading and writing a run folder's lines as the ask server and serve do."""

from __future__ import annotations

import asyncio

from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import InboxKind, InboxLine, ProgressKind, ProgressLine

from shadowclone_testing.suites.engines.watch import TURN_TIMEOUT_S


def progress_lines(folder: RunFolder, kind: ProgressKind) -> list[ProgressLine]:
    """The run folder's progress lines of `kind`; every line must parse."""
    lines, problems, _ = folder.progress()
    assert problems == [], problems
    return [line for line in lines if line.kind is kind]


async def wait_for_progress(
    folder: RunFolder, kind: ProgressKind, timeout: float = TURN_TIMEOUT_S
) -> ProgressLine:
    """The first progress line of `kind`, once the run folder has one."""
    async with asyncio.timeout(timeout):
        while not (lines := progress_lines(folder, kind)):
            await asyncio.sleep(0.1)
    return lines[0]


async def wait_for_progress_lines(
    folder: RunFolder, kind: ProgressKind, timeout: float = TURN_TIMEOUT_S
) -> list[ProgressLine]:
    async with asyncio.timeout(timeout):
        while not (found := progress_lines(folder, kind)):
            await asyncio.sleep(0.05)
    return found


def deliver_answer(folder: RunFolder, question_id: str, choice: str) -> None:
    """What serve does with the owner's answer: append it to the run folder's deliveries."""
    line = InboxLine(id="i1", kind=InboxKind.ANSWER, text=choice, question_id=question_id)
    files.append_line(folder.deliveries_file, schemas.dumps(line))
