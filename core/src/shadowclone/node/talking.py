"""`send` and `answer`: the owner's lines in an active clone's inbox. Each is checked and
appended under the inbox lock, as the clone closes its inbox and reads its answers, so a line
is either taken by the clone or refused here, never lost in between."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime

from shadowclone import files
from shadowclone.errors import BadInput, NotFound, Refused
from shadowclone.node.clones import Clones
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    INBOX_CLOSED,
    ChosenBy,
    InboxKind,
    InboxLine,
    Question,
    Step,
    Via,
    dumps,
)
from shadowclone.node.views import CloneView, read_questions, read_view


class Talking:
    def __init__(self, clones: Clones, clock: Callable[[], datetime]) -> None:
        self.clones = clones
        self.clock = clock

    def _active_view(self, clone_id: str, what: str) -> tuple[RunFolder, CloneView]:
        folder = self.clones.resolve(clone_id)
        view = read_view(folder)
        if not view.state.active:
            raise Refused(f"clone {folder.id} is {view.state}; it takes no {what}")
        if view.stop_requested:
            raise Refused(f"clone {folder.id} is stopping; it takes no {what}")
        return folder, view

    def send(self, clone_id: str, text: str, via: Via = Via.CLI) -> InboxLine:
        if not text.strip():
            raise BadInput("message: expected some text, got nothing")
        folder, _ = self._active_view(clone_id, "messages")
        line = InboxLine(id=_line_id(), kind=InboxKind.MESSAGE, text=text, at=self.clock(), via=via)
        # Under the inbox lock, as the clone closes its inbox: a message is either accepted
        # before the close (and the clone waits for it) or refused here.
        with files.lock_for(folder.inbox_file):
            progress, _, _ = folder.progress()
            if any(p.final for p in progress):
                raise Refused(f"clone {folder.id} has finished; it takes no more messages")
            closed = folder.inbox_closed_file.exists()
            if closed or any(p.step is Step.SAVE and p.text == INBOX_CLOSED for p in progress):
                raise Refused(
                    f"clone {folder.id} is saving its work; it takes no more messages "
                    "(start a new clone for more work)"
                )
            files.append_line(folder.inbox_file, dumps(line), locked=True)
        return line

    def answer(self, clone_id: str, question_id: str, choice: str, via: Via = Via.CLI) -> InboxLine:
        folder, _ = self._active_view(clone_id, "answers")
        # The inbox lock makes check-then-append atomic: two answers cannot both pass.
        with files.lock_for(folder.inbox_file):
            progress, _, _ = folder.progress()
            questions = read_questions(folder, progress)
            question = questions.asked.get(question_id)
            if question is None:
                known = ", ".join(questions.asked) or "none"
                raise NotFound(
                    f"clone {folder.id} has no question {question_id!r} (its questions: {known})"
                )
            settled = questions.settled.get(question_id)
            if settled is not None and settled.chosen_by is ChosenBy.WITHDRAWN:
                raise Refused(
                    f"question {question_id} was withdrawn: the engine stopped waiting for it"
                )
            if settled is not None and settled.chosen_by is ChosenBy.TIMEOUT:
                raise Refused(
                    f"question {question_id} has expired: with no answer in time, the clone "
                    f"took the recommended option {settled.choice!r}"
                )
            if settled is not None or question_id in questions.pending:
                raise Refused(f"question {question_id} is already answered")
            chosen = _choose(question, choice)
            line = InboxLine(
                id=_line_id(),
                kind=InboxKind.ANSWER,
                text=chosen,
                question_id=question_id,
                at=self.clock(),
                via=via,
            )
            files.append_line(folder.inbox_file, dumps(line), locked=True)
        return line


def _line_id() -> str:
    return secrets.token_hex(8)


def _choose(question: Question, choice: str) -> str:
    """The option `choice` names (exactly, in any case, or by its number), or free text."""
    wanted = choice.strip()
    for option in question.options:
        if option == wanted or option.casefold() == wanted.casefold():
            return option
    if wanted.isdigit() and 1 <= int(wanted) <= len(question.options):
        return question.options[int(wanted) - 1]
    if question.free_text and wanted:
        return wanted
    raise BadInput(
        f"choice {choice!r} for question {question.id}: expected one of "
        + ", ".join(repr(o) for o in question.options)
        + (" or an option's number" if question.options else "")
    )
