"""Progress lines written from inside the clone, each passed through redaction first.

The ask server and the run program are separate processes appending to one progress file;
whole-line appends under the file's lock keep their lines apart, and the same lock makes
question ids unique within the run folder.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs

from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder, read_json_lines
from shadowclone.node.schemas import (
    Answer,
    ChosenBy,
    ProgressKind,
    ProgressLine,
    Question,
    Step,
    Usage,
    Via,
)
from shadowclone.plugin.types import Outcome
from shadowclone.redact import HOLD_S, HoldBack, Redactor

Redact = Callable[[str], str]
"""Takes any text bound for a progress line and returns it with every secret masked."""


_QUESTION_ID = re.compile(r"^q(\d+)$")


class ProgressWriter:
    """Appends progress lines to one run folder; every string passes `redact` on its way.

    `path` writes them to another file instead: the ask server, which runs as the engine's
    user, may not write the run folder, and leaves its lines for the run program to relay.
    """

    def __init__(
        self,
        folder: RunFolder,
        redact: Redact,
        path: Path | None = None,
        *,
        watch: Callable[[], object] | None = None,
    ) -> None:
        self.folder = folder
        self.path = path or folder.progress_file
        self._redact = redact
        self._watch = watch
        """Called before each line: learns the credentials that appeared meanwhile."""
        self._texts: HoldBack[ProgressLine] | None = (
            HoldBack(redact) if isinstance(redact, Redactor) else None
        )
        """The lines' texts as one stream: a secret split across two lines (or two writes of
        the engine) is recognised across them, and a line whose end may begin one waits (at
        most `HOLD_S`) for the next."""
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None

    def write(self, line: ProgressLine) -> None:
        """Redact and append any line; the helpers below build the usual ones."""
        with self._lock:
            if self._watch is not None:
                self._watch()
            if self._texts is None:
                self._append([(line, self._redact(line.text))])
                return
            self._append(self._texts.push(line, line.text))
            if self._texts.holding and self._timer is None:
                self._timer = threading.Timer(HOLD_S, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write the line held back for the next one's sake, if any (see `HoldBack`)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._texts is not None:
                self._append(self._texts.release())

    def _append(self, lines: list[tuple[ProgressLine, str]]) -> None:
        for line, text in lines:
            files.append_line(self.path, schemas.dumps(self._redacted(line, text)))
        if lines and self._texts is not None and not self._texts.holding and self._timer:
            self._timer.cancel()
            self._timer = None

    def note(self, step: Step, text: str) -> None:
        self.write(ProgressLine(step=step, kind=ProgressKind.NOTE, text=text))

    def overloaded(self, text: str) -> None:
        self.write(ProgressLine(step=Step.ENGINE, kind=ProgressKind.OVERLOADED, text=text))

    def scheduled(self, text: str, until: datetime | None) -> None:
        """The engine waits until `until` for its login's usage limit (None: no more)."""
        line = ProgressLine(step=Step.ENGINE, kind=ProgressKind.SCHEDULED, text=text, until=until)
        self.write(line)

    def text(self, text: str, step: Step = Step.ENGINE) -> None:
        self.write(ProgressLine(step=step, kind=ProgressKind.TEXT, text=text))

    def tool(self, name: str, detail: str = "", step: Step = Step.ENGINE) -> None:
        text = f"{name}: {detail}" if detail else name
        self.write(ProgressLine(step=step, kind=ProgressKind.TOOL, text=text))

    def usage(
        self,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None = None,
        step: Step = Step.ENGINE,
    ) -> None:
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd)
        text = f"{input_tokens} tokens in, {output_tokens} out"
        if cost_usd is not None:
            text += f", ${cost_usd:.4f}"
        self.write(ProgressLine(step=step, kind=ProgressKind.USAGE, text=text, usage=usage))

    def question(
        self,
        text: str,
        options: Sequence[str],
        recommended: str,
        timeout_s: float,
        *,
        free_text: bool = False,
        step: Step = Step.ENGINE,
        cap: bool = False,
    ) -> Question:
        """Write a question line under a fresh id (`q1`, `q2`...) and return the question."""
        self.flush()  # the lines before it come before it
        path = self.path
        with files.lock_for(path):
            question = self._redacted_question(
                Question(
                    id=self._next_question_id(),
                    text=text,
                    options=tuple(options),
                    recommended=recommended,
                    free_text=free_text,
                    timeout_s=timeout_s,
                    cap=cap,
                )
            )
            line = ProgressLine(
                step=step, kind=ProgressKind.QUESTION, text=question.text, question=question
            )
            files.append_line(path, schemas.dumps(line), locked=True)
        return question

    def answer(
        self,
        question_id: str,
        choice: str,
        chosen_by: ChosenBy = ChosenBy.OWNER,
        step: Step = Step.ENGINE,
        via: Via | None = None,
    ) -> None:
        answer = Answer(question_id=question_id, choice=choice, chosen_by=chosen_by, via=via)
        self.write(ProgressLine(step=step, kind=ProgressKind.ANSWER, text=choice, answer=answer))

    def message(self, text: str, step: Step = Step.ENGINE) -> None:
        self.write(ProgressLine(step=step, kind=ProgressKind.MESSAGE, text=text))

    def error(self, step: Step, text: str) -> None:
        self.write(ProgressLine(step=step, kind=ProgressKind.ERROR, text=text))

    def final(self, outcome: Outcome, pr_url: str | None, report: str) -> None:
        """The final line: the clone's outcome and report; nothing follows it."""
        self.write(
            ProgressLine(
                step=Step.FINISH,
                kind=ProgressKind.FINAL,
                text=f"clone {outcome.value}",
                outcome=outcome,
                pr_url=pr_url,
                report=report,
            )
        )
        self.flush()

    def _next_question_id(self) -> str:
        """One more than the highest question id so far; the caller holds the file's lock."""
        lines, _, _ = read_json_lines(self.path, ProgressLine)
        highest = 0
        for line in lines:
            if line.question is not None:
                match = _QUESTION_ID.match(line.question.id)
                if match:
                    highest = max(highest, int(match.group(1)))
        return f"q{highest + 1}"

    def _redacted_question(self, question: Question) -> Question:
        return attrs.evolve(
            question,
            text=self._redact(question.text),
            options=tuple(self._redact(option) for option in question.options),
            recommended=self._redact(question.recommended),
        )

    def _redacted(self, line: ProgressLine, text: str) -> ProgressLine:
        redact = self._redact
        return attrs.evolve(
            line,
            text=text,
            report=None if line.report is None else redact(line.report),
            question=None if line.question is None else self._redacted_question(line.question),
            answer=(
                None
                if line.answer is None
                else attrs.evolve(line.answer, choice=redact(line.answer.choice))
            ),
        )


class OpenQuestions:
    """Follows a run folder's progress lines to know which questions await an answer.

    A question counts as open until its answer line, or until its own wait limit plus
    `grace_s` has passed, so that a question whose ask server died cannot hold a clone open.
    """

    def __init__(self, folder: RunFolder, grace_s: float = 60.0) -> None:
        self.folder = folder
        self.grace_s = grace_s
        self._offset = 0
        self._open: dict[str, tuple[Question, datetime]] = {}

    def refresh(self) -> bool:
        """Read new progress lines; True if any question was asked or answered since the last
        call."""
        lines, _, self._offset = self.folder.progress(self._offset)
        changed = False
        for line in lines:
            if line.kind is ProgressKind.QUESTION and line.question is not None:
                self._open[line.question.id] = (line.question, line.at)
                changed = True
            elif line.kind is ProgressKind.ANSWER and line.answer is not None:
                self._open.pop(line.answer.question_id, None)
                changed = True
        return changed

    def current(self, now: datetime | None = None) -> list[Question]:
        """The questions still open now, oldest first."""
        now = now or datetime.now(UTC)
        return [
            question
            for question, asked_at in self._open.values()
            if now < asked_at + timedelta(seconds=question.timeout_s + self.grace_s)
        ]


RELAYED_KINDS = frozenset({ProgressKind.QUESTION, ProgressKind.ANSWER})


class AskRelay:
    """Carries the ask server's question and answer lines into the run folder's progress.

    The ask server runs as the engine's user, who may not write the run folder (a forged final
    line would end the clone's record). It writes its lines to a file of the engine's; the run
    program copies only questions and answers from there, stamped now and redacted again.
    """

    def __init__(self, outbox: Path, progress: ProgressWriter) -> None:
        self.outbox = outbox
        self.progress = progress
        self._offset = 0

    def pass_once(self) -> int:
        """Relay the lines written since the last pass; returns how many."""
        lines, _, self._offset = read_json_lines(self.outbox, ProgressLine, self._offset)
        relayed = 0
        for line in lines:
            if line.kind not in RELAYED_KINDS:
                continue
            if (line.kind is ProgressKind.QUESTION) != (line.question is not None):
                continue
            if (line.kind is ProgressKind.ANSWER) != (line.answer is not None):
                continue
            self.progress.write(
                attrs.evolve(line, step=Step.ENGINE, at=datetime.now(UTC), usage=None)
            )
            relayed += 1
        return relayed

    async def run(self, poll_s: float = 0.1) -> None:
        """Relay until cancelled, with a last pass then."""
        try:
            while True:
                self.pass_once()
                await asyncio.sleep(poll_s)
        finally:
            self.pass_once()
