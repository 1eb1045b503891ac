"""The `shadowclone_ask` MCP server (stdio): one tool, `ask`, that puts a question to the owner.

A call writes a question progress line (so the clone shows as waiting), waits for the owner's
answer among the delivered inbox lines, writes the answer line and returns the choice. After
the wait limit the recommended option is taken, the answer line says a timeout chose, and the
model is told to skip every destructive step.

stdout is the MCP channel: everything else goes to stderr through `logging`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ChosenBy, InboxKind, InboxLine, Question
from shadowclone.run.ask import (
    DEFAULT_TIMEOUT_S,
    OUTBOX_VARIABLE,
    RUN_FOLDER_VARIABLE,
    SERVER_NAME,
    TIMEOUT_VARIABLE,
    TOOL_NAME,
)
from shadowclone.run.inbox import POLL_S, delivered
from shadowclone.run.progress import ProgressWriter, Redact
from shadowclone.run.redact import Redactor

log = logging.getLogger(__name__)

MAX_OPTIONS = 6
MAX_OPTION_CHARS = 200

INSTRUCTIONS = (
    "Use the ask tool to put a question to the owner, the person this work is for, when a "
    "decision really needs them. Everything else, decide yourself."
)

TOOL_DESCRIPTION = """\
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


def build_server(
    folder: RunFolder,
    redact: Redact,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = POLL_S,
    outbox: Path | None = None,
) -> MCPServer:
    """The server for one run folder, ready for `run()` or an in-memory client; its lines go
    to `outbox` when given, else to the run folder's progress."""
    progress = ProgressWriter(folder, redact, outbox)
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    async def ask(
        question: Annotated[
            str, Field(description="The question, in a sentence or two, with what it decides.")
        ],
        options: Annotated[
            list[str],
            Field(description=f"2 to {MAX_OPTIONS} short answers the owner can pick from."),
        ],
        recommended: Annotated[
            str, Field(description="The option you recommend; exactly one of `options`.")
        ],
    ) -> str:
        question = question.strip()
        options = [option.strip() for option in options]
        recommended = recommended.strip()
        _check(question, options, recommended)
        asked = progress.question(question, options, recommended, timeout_s)
        log.info("asked %s: %s", asked.id, asked.text)
        try:
            answer = await asyncio.wait_for(_answer_to(folder, asked.id, poll_s), timeout_s)
        except TimeoutError:
            progress.answer(asked.id, recommended, ChosenBy.TIMEOUT)
            log.info("no answer to %s in %g s; took %r", asked.id, timeout_s, recommended)
            return _timed_out(asked, recommended, timeout_s)
        except asyncio.CancelledError:
            progress.answer(asked.id, "", ChosenBy.WITHDRAWN)
            raise
        progress.answer(asked.id, answer.text, ChosenBy.OWNER)
        log.info("answer to %s: %s", asked.id, answer.text)
        return f"The owner answered your question ({asked.id}): {answer.text}"

    server.add_tool(
        ask,
        name=TOOL_NAME,
        title="Ask the owner",
        description=TOOL_DESCRIPTION.format(max_options=MAX_OPTIONS, wait=_duration(timeout_s)),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        structured_output=False,
    )
    return server


def _check(question: str, options: list[str], recommended: str) -> None:
    """Refuse a malformed question with a message the model can act on."""
    if not question:
        raise ToolError("`question` is empty: write the question for the owner.")
    if not 2 <= len(options) <= MAX_OPTIONS:
        raise ToolError(f"give between 2 and {MAX_OPTIONS} options, not {len(options)}.")
    if any(not option for option in options):
        raise ToolError("an option is empty: every option needs a few words.")
    if len(set(options)) != len(options):
        raise ToolError("two options are the same: make each option different.")
    if any(len(option) > MAX_OPTION_CHARS for option in options):
        raise ToolError(
            f"an option is longer than {MAX_OPTION_CHARS} characters: keep options short and "
            "put the explanation in the question."
        )
    if recommended not in options:
        raise ToolError(
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
        f"{_duration(timeout_s)}, so your recommended option was taken: {recommended}. "
        "Go on with it, and skip every destructive step: do not delete or overwrite files, "
        "branches or data, do not force-push or rewrite history, and do nothing that cannot be "
        "undone. Say in your final report which steps you skipped."
    )


def _duration(seconds: float) -> str:
    if seconds >= 60:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"


def _settings() -> tuple[RunFolder, float, Path | None]:
    """Read the configuration variables, or raise `ValueError` naming the bad one."""
    folder_text = os.environ.get(RUN_FOLDER_VARIABLE, "")
    if not folder_text:
        raise ValueError(f"{RUN_FOLDER_VARIABLE} is not set")
    folder = RunFolder(Path(folder_text))
    if not folder.path.is_dir():
        raise ValueError(f"{RUN_FOLDER_VARIABLE}={folder_text} is not a folder")
    timeout_text = os.environ.get(TIMEOUT_VARIABLE, "")
    try:
        timeout_s = float(timeout_text) if timeout_text else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"{TIMEOUT_VARIABLE}={timeout_text} is not a number") from None
    if not timeout_s > 0:
        raise ValueError(f"{TIMEOUT_VARIABLE}={timeout_text} must be more than 0")
    outbox_text = os.environ.get(OUTBOX_VARIABLE, "")
    return folder, timeout_s, Path(outbox_text) if outbox_text else None


def main() -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"{SERVER_NAME}: %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # a line per file change
    try:
        folder, timeout_s, outbox = _settings()
    except ValueError as error:
        log.error("cannot start: %s", error)
        return 2
    # The server runs as the engine, which holds no secret: it masks tokens of known shapes,
    # and the run program masks every secret's value in the lines it relays.
    build_server(folder, Redactor(()), timeout_s, outbox=outbox).run("stdio")
    return 0
