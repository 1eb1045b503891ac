"""A clone as the owner sees it, read from its run folder alone: the request, serve's record,
the stop marker and the clone's own progress and inbox. Every node operation that shows or
checks a clone reads it here, so they all see one clone the same way."""

from __future__ import annotations

from datetime import datetime

import attrs

from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    Answer,
    Caps,
    InboxKind,
    Outcome,
    ProgressLine,
    Question,
    State,
    Usage,
)
from shadowclone.node.scrub import scrubbed, scrubbed_line
from shadowclone.node.target import Target


@attrs.frozen
class CloneView:
    """A clone as the owner sees it: the request, serve's record and the clone's own lines."""

    id: str
    target: Target
    engine: str
    state: State
    requested_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    stop_requested: bool = False
    question: Question | None = None
    pr_url: str | None = None
    outcome: Outcome | None = None
    report: str | None = None
    exit_code: int | None = None
    output_tail: str = ""
    reason: str = ""
    """Why serve ended the clone as it did, where its final line does not say."""
    last_progress: tuple[ProgressLine, ...] = ()
    problems: tuple[str, ...] = ()
    """Malformed files or lines met while reading this clone; each names its file."""
    usage: Usage = attrs.field(factory=Usage)
    """The engine's tokens and cost so far, over all its turns."""
    turns: int = 0
    scheduled_until: datetime | None = None
    """While scheduled: when its login's usage limit resets and the engine goes on."""
    caps: Caps = attrs.field(factory=Caps)
    """Where the clone pauses to ask whether to go on (as started; raised ones are in its
    progress lines)."""
    waiting_for: str = ""
    """What a queued clone waits for (serve, a slot, its login); shown by `start` and `get`."""


@attrs.frozen
class Questions:
    """The questions a clone asked, which are settled, and which has an answer on its way."""

    asked: dict[str, Question]
    settled: dict[str, Answer]
    pending: frozenset[str]

    def open(self) -> Question | None:
        for question in reversed(self.asked.values()):
            if question.id not in self.settled and question.id not in self.pending:
                return question
        return None


@attrs.frozen
class Listing:
    clones: list[CloneView]
    problems: list[str]


def read_view(folder: RunFolder, lines: int = 0) -> CloneView:
    """The clone of `folder`; with `lines`, its last progress lines and open question too."""
    request = folder.request()
    problems: list[str] = []
    # The stop marker before the record. A marker is written under the clone's stop lock,
    # which serve holds from its look at the marker until the clone runs, so a queued
    # clone with a marker and no `launching_at` never starts. Only a stop that gave up
    # waiting for the lock writes one during a launch, once `launching_at` is set; read in
    # this order, that clone is never seen here as stopped in the queue (whose active
    # marker admission would drop).
    stop = folder.stop_marker()
    try:
        record = folder.record()
    except MalformedFile as error:
        record, problems = None, [str(error)]
    if record is not None:
        record = scrubbed(record)  # serve writes it scrubbed; a file others changed may not be
    state = record.state if record else State.QUEUED
    launching = record is not None and record.launching_at is not None
    if state is State.QUEUED and stop is not None and not launching:
        state = State.STOPPED  # a queued clone with a stop marker never starts
    view = CloneView(
        id=folder.id,
        target=request.target,
        engine=request.engine,
        state=state,
        requested_at=request.requested_at,
        caps=request.caps,
        stop_requested=stop is not None,
        problems=tuple(problems),
    )
    if record is not None:
        view = attrs.evolve(
            view,
            started_at=record.started_at,
            ended_at=record.ended_at,
            question=record.question,
            pr_url=record.pr_url,
            outcome=record.outcome,
            report=record.report,
            exit_code=record.exit_code,
            output_tail=record.output_tail,
            reason=record.reason,
            last_progress=(record.last_progress,) if record.last_progress else (),
            usage=record.usage,
            turns=record.turns,
            scheduled_until=record.scheduled_until if record.state is State.SCHEDULED else None,
        )
    if lines:
        # A huge log is read from its last whole lines: the latest state is what `get` shows.
        skipped = files.tail_offset(folder.progress_file)
        progress, line_problems, _ = folder.progress(skipped)
        if skipped:
            line_problems.insert(
                0,
                f"{folder.progress_file}: its first {skipped} bytes were skipped (too much "
                "to read at once); the lines shown are its latest",
            )
        questions = read_questions(folder, progress)
        final = next((p for p in reversed(progress) if p.final), None)
        view = attrs.evolve(
            view,
            last_progress=tuple(scrubbed_line(line) for line in progress[-lines:]),
            question=questions.open() if state.active else None,
            pr_url=view.pr_url or (final.pr_url if final else None),
            report=view.report or (final.report if final else None),
            problems=view.problems + tuple(line_problems),
        )
    return view


def read_questions(folder: RunFolder, progress: list[ProgressLine]) -> Questions:
    """The questions of `progress`, settled by its answers and pending by the inbox's."""
    asked: dict[str, Question] = {}
    settled: dict[str, Answer] = {}
    for line in progress:
        if line.question is not None:
            asked[line.question.id] = line.question
        if line.answer is not None:
            settled[line.answer.question_id] = line.answer
    inbox, _, _ = folder.inbox()
    pending = frozenset(
        line.question_id for line in inbox if line.kind is InboxKind.ANSWER and line.question_id
    )
    return Questions(asked, settled, pending)
