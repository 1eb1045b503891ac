"""The `ask` tool itself, apart from any MCP transport: its description and input schema, and
one call: a question line written (so the clone shows as waiting), the owner's answer awaited
among the delivered inbox lines, an answer line written and the choice returned. After the wait
limit the recommended option is taken, the answer line says a timeout chose, and the model is
told to skip every destructive step.

Both servers use it: the run program's own (`http.py`, no MCP SDK) and the stdio server an
engine may start itself (`server.py`, on the SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ChosenBy, InboxKind, InboxLine, Question
from shadowclone.run.inbox import POLL_S, delivered
from shadowclone.run.progress import ProgressWriter, Redact

log = logging.getLogger(__name__)

MAX_OPTIONS = 6
MAX_OPTION_CHARS = 200

TITLE = "Ask the owner"
INSTRUCTIONS = (
    "Use the ask tool to put a question to the owner, the person this work is for, when a "
    "decision really needs them. Everything else, decide yourself."
)

_DESCRIPTION = """\
Ask the owner (the person you are working for) a question, and wait for the answer.

Ask only when a decision really needs the owner: the issue, the code and the repository's
conventions do not settle it, and a wrong guess would be costly (what to build when the issue
is ambiguous, deleting or rewriting something the owner may want to keep, choosing between
designs that cannot both be done). Do not ask for permission to do ordinary work, and do not
ask what you can find out yourself. Ask one thing at a time.

Give 2 to {max_options} options, each a few words, and name the option you recommend:
`recommended` must be exactly one of `options`. The owner may take a while; this call can wait
up to {wait}. If the owner does not answer in time, your recommended option is
taken and you must then skip every destructive step.
"""

QUESTION_HELP = "The question, in a sentence or two, with what it decides."
OPTIONS_HELP = f"2 to {MAX_OPTIONS} short answers the owner can pick from."
RECOMMENDED_HELP = "The option you recommend; exactly one of `options`."

INPUT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "title": "Question", "description": QUESTION_HELP},
        "options": {
            "type": "array",
            "items": {"type": "string"},
            "title": "Options",
            "description": OPTIONS_HELP,
        },
        "recommended": {"type": "string", "title": "Recommended", "description": RECOMMENDED_HELP},
    },
    "required": ["question", "options", "recommended"],
}
"""The JSON schema the SDK's server derives from `server.py`'s annotated parameters, written
out for the server that does without the SDK."""

ANNOTATIONS: Final[Mapping[str, bool]] = {"readOnlyHint": True, "openWorldHint": False}


class Refused(Exception):
    """A malformed call: the message says the model what to do instead."""


class ServedTool(Protocol):
    """A tool the run program serves beside `ask` (run/ask/tools.py)."""

    name: str

    def listing(self) -> Mapping[str, Any]:
        """The tool as `tools/list` gives it: name, title, description, inputSchema,
        annotations."""
        ...

    async def call(self, arguments: Mapping[str, Any]) -> str:
        """The tool's answer; raises Refused for a call it will not do."""
        ...


def description(timeout_s: float) -> str:
    return _DESCRIPTION.format(max_options=MAX_OPTIONS, wait=duration(timeout_s))


class AskTool:
    """Questions of one clone, numbered in its run folder's progress."""

    def __init__(
        self,
        folder: RunFolder,
        redact: Redact,
        timeout_s: float,
        poll_s: float = POLL_S,
        outbox: Path | None = None,
    ) -> None:
        self.folder = folder
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.progress = ProgressWriter(folder, redact, outbox)

    async def call(self, arguments: Mapping[str, Any]) -> str:
        """The tool's answer to `arguments` as an MCP client sends them (any JSON)."""
        question, options, recommended = _parse(arguments)
        return await self.ask(question, options, recommended)

    async def ask(self, question: str, options: list[str], recommended: str) -> str:
        asked, choice, by = await self.choose(question, options, recommended)
        if by is ChosenBy.TIMEOUT:
            return _timed_out(asked, recommended, self.timeout_s)
        return f"The owner answered your question ({asked.id}): {choice}"

    async def choose(
        self, question: str, options: list[str], recommended: str, cap: bool = False
    ) -> tuple[Question, str, ChosenBy]:
        """Put the question to the owner and wait: the question, the choice and who chose
        (the owner, or the timeout that took the recommended option)."""
        question = question.strip()
        options = [option.strip() for option in options]
        recommended = recommended.strip()
        _check(question, options, recommended)
        asked = self.progress.question(question, options, recommended, self.timeout_s, cap=cap)
        log.info("asked %s: %s", asked.id, asked.text)
        try:
            answer = await asyncio.wait_for(
                _answer_to(self.folder, asked.id, self.poll_s), self.timeout_s
            )
        except TimeoutError:
            self.progress.answer(asked.id, recommended, ChosenBy.TIMEOUT)
            log.info("no answer to %s in %g s; took %r", asked.id, self.timeout_s, recommended)
            return asked, recommended, ChosenBy.TIMEOUT
        except asyncio.CancelledError:
            self.progress.answer(asked.id, "", ChosenBy.WITHDRAWN)
            raise
        self.progress.answer(asked.id, answer.text, ChosenBy.OWNER, via=answer.via)
        log.info("answer to %s: %s", asked.id, answer.text)
        return asked, answer.text, ChosenBy.OWNER


def _parse(arguments: Mapping[str, Any]) -> tuple[str, list[str], str]:
    """The three arguments, each of its type, or `Refused` naming the first that is not."""
    if not isinstance(arguments, Mapping):
        raise Refused("the arguments must be an object with question, options and recommended.")
    missing = [name for name in INPUT_SCHEMA["required"] if name not in arguments]
    if missing:
        raise Refused(f"missing argument(s): {', '.join(missing)}.")
    question, options, recommended = (arguments[n] for n in INPUT_SCHEMA["required"])
    if not isinstance(question, str):
        raise Refused("`question` must be a string.")
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise Refused("`options` must be a list of strings.")
    if not isinstance(recommended, str):
        raise Refused("`recommended` must be a string.")
    return question, options, recommended


def _check(question: str, options: list[str], recommended: str) -> None:
    if not question:
        raise Refused("`question` is empty: write the question for the owner.")
    if not 2 <= len(options) <= MAX_OPTIONS:
        raise Refused(f"give between 2 and {MAX_OPTIONS} options, not {len(options)}.")
    if any(not option for option in options):
        raise Refused("an option is empty: every option needs a few words.")
    if len(set(options)) != len(options):
        raise Refused("two options are the same: make each option different.")
    if any(len(option) > MAX_OPTION_CHARS for option in options):
        raise Refused(
            f"an option is longer than {MAX_OPTION_CHARS} characters: keep options short and "
            "put the explanation in the question."
        )
    if recommended not in options:
        raise Refused(
            f"`recommended` ({recommended!r}) is not one of the options; it must be exactly "
            f"one of: {', '.join(repr(option) for option in options)}."
        )


async def _answer_to(folder: RunFolder, question_id: str, poll_s: float) -> InboxLine:
    async with contextlib.aclosing(delivered(folder, {InboxKind.ANSWER}, poll_s)) as answers:
        async for line in answers:
            if line.question_id == question_id:
                return line
    raise RuntimeError("the delivered inbox lines ended")  # `delivered` never ends by itself


def _timed_out(question: Question, recommended: str, timeout_s: float) -> str:
    return (
        f"The owner did not answer your question ({question.id}) within "
        f"{duration(timeout_s)}, so your recommended option was taken: {recommended}. "
        "Go on with it, and skip every destructive step: do not delete or overwrite files, "
        "branches or data, do not force-push or rewrite history, and do nothing that cannot be "
        "undone. Say in your final report which steps you skipped."
    )


def duration(seconds: float) -> str:
    if seconds >= 60:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"
