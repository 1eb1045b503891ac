"""Record what the real Codex app-server says to the driver, for the normalization tests.

    .venv/bin/python -m tests.engines.record_codex_transcript

needs the pinned CLI (scripts/install-engines) and writes data/codex-<version>.jsonl: every
JSON-RPC line of one session, both ways (`{"dir": "in" | "out", "msg": ...}`), as the driver
itself exchanged them (its wire log). Five turns: a shell command with text before it; a call of
the ask server's tool; a slow command during which the owner's message steers the turn; a call
of a tool that is not there, which fails the turn; an endless command cut short by `stop()`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from shadowclone.plugin import (
    EngineEvent,
    EngineSession,
    EngineTask,
    FinishedEvent,
    ToolUseEvent,
    TurnEndedEvent,
)
from shadowclone_testing.fakes.models import (
    FAKE_MODEL,
    CallTool,
    FakeModelServer,
    Reply,
    Shell,
    Text,
)
from shadowclone_testing.harness import engines_bin
from shadowclone_testing.suites.engine import STAND_IN_ASK_SERVER, git_workspace

from shadowclone_codex.driver import CodexEngine
from shadowclone_codex.rpc import wire

ENGINES_BIN = engines_bin()

log = logging.getLogger(__name__)

DATA = Path(__file__).with_name("data")

SCRIPT: list[Reply] = [
    Shell("echo hello > out.txt", text="Writing the file."),
    Text("Wrote out.txt."),
    CallTool(
        "shadowclone_ask",
        "ask",
        {"question": "Squash the commits?", "options": ["yes", "no"], "recommended": "no"},
    ),
    Text("The owner would rather not squash."),
    Shell("echo started && sleep 3.5 && echo over"),
    Text("Stopped the job, as asked."),
    CallTool("no_such_server", "nothing"),
    Shell("echo started && sleep 985.5 && echo over"),
]
TURNS = [
    "Write hello into out.txt.",
    "Ask the owner about squashing.",
    "Run the slow job.",
    "Call the missing tool.",
    "Run the endless job.",
]
MESSAGE = "Owner says: stop that job."


class WireRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        direction = getattr(record, "direction", "?")
        self.lines.append({"dir": direction, "msg": json.loads(record.getMessage())})


async def next_event(events: Any, kind: type[EngineEvent]) -> EngineEvent:
    async with asyncio.timeout(120):
        while True:
            event = await anext(events)
            log.info("event: %r", event)
            if isinstance(event, kind):
                return event


async def drive(session: EngineSession) -> None:
    events = aiter(session.events())
    await next_event(events, TurnEndedEvent)
    await session.send(TURNS[1])
    await next_event(events, TurnEndedEvent)
    await session.send(TURNS[2])
    await next_event(events, ToolUseEvent)
    await session.send(MESSAGE)
    await next_event(events, TurnEndedEvent)
    await session.send(TURNS[3])
    await next_event(events, TurnEndedEvent)
    await session.send(TURNS[4])
    await next_event(events, ToolUseEvent)
    await asyncio.sleep(1)
    await session.stop()
    await next_event(events, FinishedEvent)


async def record(out: Path) -> None:
    recorder = WireRecorder()
    wire.addHandler(recorder)
    wire.setLevel(logging.DEBUG)
    with FakeModelServer(SCRIPT) as server, tempfile.TemporaryDirectory() as tmp:
        task = EngineTask(
            workspace=git_workspace(Path(tmp) / "workspace"),
            prompt=TURNS[0],
            ask_command=(sys.executable, str(STAND_IN_ASK_SERVER)),
            env={
                "OPENAI_BASE_URL": server.openai_url,
                "OPENAI_API_KEY": "sk-fake-key",
                "PATH": f"{ENGINES_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            },
            state_dir=Path(tmp) / "state",
            model=FAKE_MODEL,
        )
        session = await CodexEngine().launch(task)
        await drive(session)
    wire.removeHandler(recorder)
    # The machine-specific paths of the temporary folders are kept: they are only strings.
    out.write_text("".join(json.dumps(line) + "\n" for line in recorder.lines))
    log.info("wrote %d lines to %s", len(recorder.lines), out)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    version = subprocess.run(
        [str(ENGINES_BIN / "codex"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    asyncio.run(record(DATA / f"codex-{version}.jsonl"))


if __name__ == "__main__":
    main()
