"""Record what the real Claude Code prints in stream-json mode, for the normalization tests.

    .venv/bin/python -m tests.engines.record_claude_transcript

needs the pinned CLI (scripts/install-engines) and writes data/claude-<version>.jsonl: every
stdout line of one session with four turns, driven the way the driver drives it: a shell command
with text before it; a call of the ask server's tool; a slow command cut short by the
`interrupt` control request, followed by the owner's message as the next turn.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from shadowclone.plugin import EngineTask
from shadowclone_testing.fakes.models import CallTool, FakeModelServer, Reply, Shell, Text
from shadowclone_testing.harness import engines_bin
from shadowclone_testing.suites.engine import STAND_IN_ASK_SERVER, git_workspace

from shadowclone_claude.driver import command_line, engine_env

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
    Shell("echo started && sleep 30.5 && echo over"),
    Text("Stopped the job, as asked."),
]
TURNS = ["Write hello into out.txt.", "Ask the owner about squashing.", "Run the slow job."]
MESSAGE = "Owner says: stop that job."


def user_line(text: str) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "session_id": "default",
    }


def write(stdin: IO[str], line: dict[str, Any]) -> None:
    stdin.write(json.dumps(line) + "\n")
    stdin.flush()


def record(out: Path) -> None:
    with FakeModelServer(SCRIPT) as server, tempfile.TemporaryDirectory() as tmp:
        task = EngineTask(
            workspace=git_workspace(Path(tmp) / "workspace"),
            prompt=TURNS[0],
            ask_command=(sys.executable, str(STAND_IN_ASK_SERVER)),
            env={"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key"},
            state_dir=Path(tmp) / "state",
        )
        env = engine_env(task)
        env["PATH"] = f"{ENGINES_BIN}:{env.get('PATH', '')}"
        process = subprocess.Popen(
            command_line(task, str(ENGINES_BIN / "claude")),
            cwd=task.workspace,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdin is not None and process.stdout is not None
        lines: list[str] = []
        turns = iter([*TURNS[1:], MESSAGE])
        write(process.stdin, user_line(TURNS[0]))
        for raw in process.stdout:
            lines.append(raw)
            line = json.loads(raw)
            content = (line.get("message") or {}).get("content") or []
            if line["type"] == "assistant" and any(
                block.get("input", {}).get("command", "").startswith("echo started")
                for block in content
            ):
                write(
                    process.stdin,
                    {
                        "type": "control_request",
                        "request_id": "shadowclone_interrupt_1",
                        "request": {"subtype": "interrupt"},
                    },
                )
            if line["type"] == "result":
                next_turn = next(turns, None)
                if next_turn is None:
                    process.stdin.close()
                else:
                    write(process.stdin, user_line(next_turn))
        process.wait(timeout=60)
    out.write_text("".join(lines))
    log.info("wrote %d lines to %s", len(lines), out)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    version = subprocess.run(
        [str(ENGINES_BIN / "claude"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    record(DATA / f"claude-{version}.jsonl")


if __name__ == "__main__":
    main()
