"""How serve turns what it sees (progress lines, a launcher's report) into a clone's record.

Pure functions of the old record and the new facts, so the rules of stops, the record's
one writer and endings can be read, and tested, in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from shadowclone.node.schemas import (
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    State,
    Usage,
)
from shadowclone.node.scrub import scrubbed as scrubbed  # noqa: PLC0414
from shadowclone.node.scrub import scrubbed_line as scrubbed_line  # noqa: PLC0414
from shadowclone.plugin.types import CloneStatus, Outcome

ENDED_BY: dict[Outcome, State] = {
    Outcome.DONE: State.DONE,
    Outcome.FAILED: State.FAILED,
    Outcome.STOPPED: State.STOPPED,
    Outcome.STALLED: State.FAILED,
}
"""The state a clone ends in, by the outcome of its final line."""


def fold_progress(
    record: Record,
    lines: Sequence[ProgressLine],
    asked: dict[str, Question],
    from_start: bool = False,
) -> Record:
    """The record after `lines`; `asked` holds the open questions by id and is updated.
    `from_start`: `lines` are the clone's first, so the usage is counted afresh (serve reads
    every line again after a restart)."""
    if not lines:
        return record
    pr_url, outcome, report = record.pr_url, record.outcome, record.report
    usage, turns = (Usage(), 0) if from_start else (record.usage, record.turns)
    scheduled_until = record.scheduled_until
    for line in lines:
        if line.kind is ProgressKind.SCHEDULED:
            scheduled_until = line.until
        if line.kind is ProgressKind.USAGE and line.usage is not None:
            usage, turns = add_usage(usage, line.usage), turns + 1
        if line.kind is ProgressKind.QUESTION and line.question is not None:
            asked[line.question.id] = line.question
        if line.answer is not None:
            asked.pop(line.answer.question_id, None)
        if line.pr_url:
            pr_url = line.pr_url
        if line.final:
            outcome = line.outcome or Outcome.FAILED
            report = line.report
            asked.clear()
            scheduled_until = None
    question = next(reversed(asked.values()), None)
    state = record.state
    if state.launched:
        if question is not None:
            state = State.WAITING
        else:
            state = State.SCHEDULED if scheduled_until is not None else State.RUNNING
    return attrs.evolve(
        record,
        state=state,
        last_progress=lines[-1],
        question=question,
        pr_url=pr_url,
        outcome=outcome,
        report=report,
        usage=usage,
        turns=turns,
        scheduled_until=scheduled_until,
    )


def add_usage(total: Usage, more: Usage) -> Usage:
    """Tokens add up; a cost adds where one is known (an engine that reports none has none)."""
    known = [cost for cost in (total.cost_usd, more.cost_usd) if cost is not None]
    return Usage(
        input_tokens=total.input_tokens + more.input_tokens,
        output_tokens=total.output_tokens + more.output_tokens,
        cost_usd=sum(known) if known else None,
    )


def ended(record: Record, status: CloneStatus, stop_requested: bool, at: datetime) -> Record:
    """The record of a clone its launcher reports exited: the final line's outcome if it
    wrote one, else `failed` with its last output, or `stopped` if the owner stopped it."""
    if record.outcome is not None:
        state = ENDED_BY[record.outcome]
        outcome = record.outcome
        reason = ""
        if record.outcome is Outcome.STALLED:
            said = record.last_progress.text if record.last_progress else ""
            reason = "stalled: the engine showed nothing for too long" + (
                f" ({said})" if said else ""
            )
    elif stop_requested:
        state, outcome = State.STOPPED, Outcome.STOPPED
        reason = "stopped before it wrote a final progress line"
    else:
        state, outcome = State.FAILED, Outcome.FAILED
        code = "unknown" if status.exit_code is None else str(status.exit_code)
        reason = f"the clone exited (exit code {code}) with no final progress line"
    return attrs.evolve(
        record,
        state=state,
        outcome=outcome,
        reason=reason,
        exit_code=status.exit_code,
        ended_at=at,
        question=None,
        launching_at=None,
        output_tail="" if state is State.DONE else status.output_tail,
    )


def failed(record: Record, reason: str, at: datetime, output_tail: str = "") -> Record:
    """A clone that ends without its launcher's word: a failed launch, a clone lost."""
    return attrs.evolve(
        record,
        state=State.FAILED,
        outcome=Outcome.FAILED,
        reason=reason,
        ended_at=at,
        question=None,
        launching_at=None,
        output_tail=output_tail or record.output_tail,
    )


def stopped_in_queue(record: Record, at: datetime) -> Record:
    """A queued clone with a stop marker never starts."""
    return attrs.evolve(
        record,
        state=State.STOPPED,
        outcome=Outcome.STOPPED,
        reason="stopped before it started",
        ended_at=at,
        launching_at=None,
    )
