"""One scenario's world (engine, fake model server, workspace, run folder) and its launches."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin.types import Engine, EngineLimits, EngineTask
from shadowclone.redact import Redactor
from shadowclone.run.ask import ask_command
from shadowclone.run.ask.http import AskService

from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest
from shadowclone_testing.suites.engines.watch import TURN_TIMEOUT_S, Watch

STAND_IN_ASK_SERVER = Path(__file__).parent.with_name("ask_stand_in.py")


@attrs.define
class Harness:
    """One scenario's world: the engine, the fake model server, a git workspace, a state dir."""

    engine: Engine
    server: FakeModelServer
    workspace: Path
    state_dir: Path
    env: dict[str, str]
    ask_command: tuple[str, ...]
    run_folder: RunFolder
    """Where the real ask server writes its progress lines and reads delivered answers."""
    watches: list[Watch] = attrs.field(factory=list)
    ask_service: AskService | None = None

    def task(self, prompt: str, **changes: Any) -> EngineTask:
        task = EngineTask(
            workspace=self.workspace,
            prompt=prompt,
            ask_command=self.ask_command,
            env=self.env,
            state_dir=self.state_dir,
        )
        return attrs.evolve(task, **changes)

    async def launch(self, prompt: str, **changes: Any) -> Watch:
        session = await self.engine.launch(self.task(prompt, **changes))
        watch = Watch(session)
        self.watches.append(watch)
        return watch

    async def launch_with_ask_server(
        self, prompt: str, ask_timeout_s: float, transport: str = "http"
    ) -> Watch:
        """Launch with the real `shadowclone_ask` server on this run folder, waiting at most
        `ask_timeout_s` for each answer, and the engine told the same limit: served over HTTP
        from this process, as the run program does it, or (`transport="stdio"`) started by the
        engine from `ask_command`, the way left when that server cannot start."""
        changes: dict[str, Any] = {
            "ask_command": ask_command(self.run_folder.path, ask_timeout_s),
            "limits": EngineLimits(ask_timeout_s=ask_timeout_s),
        }
        if transport == "http":
            self.ask_service = AskService(self.run_folder, Redactor(()), ask_timeout_s)
            await self.ask_service.start()
            changes.update(ask_url=self.ask_service.url, ask_headers=self.ask_service.headers)
        return await self.launch(prompt, **changes)

    async def wait_for_request(
        self, where: Callable[[ModelRequest], bool], timeout: float = TURN_TIMEOUT_S
    ) -> ModelRequest:
        return await asyncio.to_thread(self.server.wait_for, where, timeout)

    async def aclose(self) -> None:
        for watch in self.watches:
            await watch.aclose()
        if self.ask_service is not None:
            await self.ask_service.close()


SEND_TO_MODEL: dict[str, float] = {}
"""Seconds from `send` to the model's first request carrying the message, by engine and state:
printed as each is measured (a figure, never asserted)."""


async def send_and_time(harness: Harness, watch: Watch, message: str, what: str) -> None:
    """Send `message` and record how long it took to reach the model, exactly once."""
    started = time.monotonic()
    await watch.session.send(message)
    await harness.wait_for_request(lambda request: request.last_user_text() == message)
    SEND_TO_MODEL[what] = time.monotonic() - started
    print(f"send -> model request, {what}: {SEND_TO_MODEL[what] * 1000:.0f} ms")
    carrying = [r for r in harness.server.model_requests() if r.contains(message)]
    assert all(r.user_texts().count(message) == 1 for r in carrying), "the message came twice"


def git_workspace(path: Path) -> Path:
    """A git repository with one commit, as a clone's checkout would be."""
    path.mkdir(parents=True)
    git = ["git", "-c", "user.name=Clone", "-c", "user.email=clone@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "README.md").write_text("# sample\n")
    subprocess.run([*git, "add", "README.md"], cwd=path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial"], cwd=path, check=True)
    return path
