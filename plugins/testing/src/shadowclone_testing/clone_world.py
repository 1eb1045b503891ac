"""The run program in a test's own process: the fake GitHub with an owner and a stranger,
the secrets, a run folder per request, and each later launch as serve makes it.

In the kit because the run program's end-to-end tests are split by theme over several
modules, which may not import one another (tests/test_layout.py); the `world` fixture
that makes a `World` is in tests/run/conftest.py.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
from shadowclone import files
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Handoff, InboxKind, InboxLine, ProgressLine, Request, dumps
from shadowclone.node.target import Target
from shadowclone.plugin.contract import RUN_FOLDER_VARIABLE, SECRETS_VARIABLE
from shadowclone.run.headstart import HeadStart
from shadowclone.run.program import run_clone
from shadowclone.serve.scheduled import due

from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.fakes.models import FakeModelServer, Reply

ANTHROPIC_KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
LOGINS = {"claude": "claude-api-key", "codex": "openai-api-key"}


@attrs.define
class World:
    """Where a test runs clones, and what it saw of their launches."""

    tmp: Path
    github: FakeGitHub
    token: str
    stranger_token: str
    phases: list[str] = attrs.field(factory=list)
    """The networks of the phases launched after the first."""
    heads: list[HeadStart] = attrs.field(factory=list)
    """The head starts `run` began, in order."""
    waits: list[Handoff] = attrs.field(factory=list)
    """The handoffs of the launches that exited to wait for a usage limit's reset."""

    def secrets(self) -> Path:
        path = self.tmp / "secrets.toml"
        path.write_text(
            f'github_token = "{self.token}"\nanthropic_api_key = "{ANTHROPIC_KEY}"\n'
            f'openai_api_key = "{OPENAI_KEY}"\n'
        )
        return path

    def folder(self, number: int, models: FakeModelServer, **changes: Any) -> RunFolder:
        folder = RunFolder(self.tmp / f"run-{number}")
        folder.path.mkdir()
        request = Request(
            id=f"clone-{number}",
            target=Target("owner", "app", number),
            engine="claude",
            login="claude-api-key",
            launcher="fake",
            image="unused",
            github_url=self.github.url,
            github_api_url=self.github.api_url,
            base_url=models.url,
            stall_timeout_s=120,
            ask_timeout_s=60,
        )
        folder.write_request(attrs.evolve(request, **changes))
        return folder

    def on(self, engine: str, number: int, models: FakeModelServer, **changes: Any) -> RunFolder:
        """A run folder for `engine` (either real one) through its API key's login."""
        codex = engine == "codex"
        return self.folder(
            number,
            models,
            engine=engine,
            login=LOGINS[engine],
            base_url=models.openai_url if codex else models.url,
            # Codex's default model turns on tools the fake model server does not speak.
            model="shadowclone-fake-model" if codex else None,
            **changes,
        )

    def run(
        self,
        folder: RunFolder,
        head_start: bool = True,
        while_waiting: Callable[[RunFolder], None] | None = None,
    ) -> tuple[int, list[ProgressLine]]:
        """Run the clone as its entry point does: with a head start (run/headstart.py) unless
        `head_start` is False, and then each later phase. A launch that exited to wait for a
        usage limit is launched again as serve does (serve/scheduled.py): at the reset, or
        at once for the owner's resume or stop; `while_waiting` runs first, each time."""
        secrets = self.secrets()
        environ = {**os.environ, RUN_FOLDER_VARIABLE: str(folder.path)}
        head = HeadStart.begin({**environ, SECRETS_VARIABLE: str(secrets)}) if head_start else None
        if head is not None:
            self.heads.append(head)
        try:
            code = asyncio.run(run_clone(folder, secrets, head_start=head))
        finally:
            if head is not None:
                head.close()
        for _ in range(6):  # launch the next phase, as serve does when a clone hands on
            handoff = folder.handoff()
            if handoff is None:
                break
            if handoff.waits:
                self.waits.append(handoff)
                if while_waiting is not None:
                    while_waiting(folder)
                deadline = time.monotonic() + 120
                while due(folder, handoff, datetime.now(UTC)) is None:
                    assert time.monotonic() < deadline, "never due"
                    time.sleep(0.05)
            else:
                self.phases.append(handoff.network.value)
            code = asyncio.run(run_clone(folder, self.secrets()))
        assert not folder.handoff_file.exists()
        lines, problems, _ = folder.progress()
        assert not problems
        return code, lines


def deliver(folder: RunFolder, question_id: str, choice: str) -> None:
    """The owner's answer, as serve delivers it."""
    line = InboxLine(
        id=f"answer-{question_id}", kind=InboxKind.ANSWER, text=choice, question_id=question_id
    )
    files.append_line(folder.deliveries_file, dumps(line))


def models(*replies: Reply) -> FakeModelServer:
    """The fake model server, answering with `replies` in order."""
    return FakeModelServer(replies)
