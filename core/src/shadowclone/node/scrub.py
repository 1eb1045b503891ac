"""Records and progress lines as the host keeps and shows them: every token of a known shape
redacted, whatever the clone wrote."""

from __future__ import annotations

import attrs

from shadowclone.node.schemas import ProgressLine, Record
from shadowclone.redact import redact_tokens


def scrubbed_line(line: ProgressLine) -> ProgressLine:
    """A progress line with every token of a known shape redacted (see `scrubbed`)."""
    return attrs.evolve(
        line,
        text=redact_tokens(line.text),
        report=None if line.report is None else redact_tokens(line.report),
    )


def scrubbed(record: Record) -> Record:
    """The record with every token of a known shape redacted in the text it copies from the
    clone (its output, its last line, the report, the reason): the clone redacts its own lines,
    but serve keeps its copies safe even from a clone that did not, and never reads the
    secrets file to know more."""
    line = None if record.last_progress is None else scrubbed_line(record.last_progress)
    question = record.question
    if question is not None:
        question = attrs.evolve(
            question,
            text=redact_tokens(question.text),
            options=tuple(redact_tokens(option) for option in question.options),
            recommended=redact_tokens(question.recommended),
        )
    return attrs.evolve(
        record,
        last_progress=line,
        question=question,
        report=None if record.report is None else redact_tokens(record.report),
        reason=redact_tokens(record.reason),
        output_tail=redact_tokens(record.output_tail),
    )
