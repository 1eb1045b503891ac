"""The Codex driver: `codex app-server` over JSON-RPC, steered with `turn/steer`.

One app-server process serves a whole clone: the driver opens one thread in the workspace and
runs turns in it (docs/engines.md). This module starts the process, early too; the connection
to it (handshake, thread, Codex's requests) is `connection.py`'s, the turns and how a message
steers them `session.py`'s, with what Codex tells of its turns kept in `turns.py`.

Approvals and other questions from Codex are answered by policy (`notifications.py`); the
container is the sandbox and the owner is reached only through the ask tool.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import attrs
from shadowclone.plugin import EngineTask, spawn_engine

from shadowclone_codex.config import codex_home, engine_env, prepare_home
from shadowclone_codex.native import Program, native_program
from shadowclone_codex.session import CodexSession

__all__ = ["PROGRAM", "CodexEngine", "CodexSession", "EarlyCodex"]

log = logging.getLogger(__name__)

PROGRAM = "codex"


class CodexEngine:
    """Starts Codex sessions (the `Engine` protocol), early too (`StartsEarly`)."""

    def __init__(self, program: str = PROGRAM) -> None:
        self.program = program

    async def launch(self, task: EngineTask) -> CodexSession:
        session = await self._spawn(task, cwd=task.workspace)
        await session.begin(task)
        return session

    def session_files(self, task: EngineTask, session_id: str) -> list[str]:
        """The thread's rollout, which `thread/resume` reads the thread back from."""
        found = sorted(codex_home(task).glob(f"sessions/**/rollout-*-{session_id}.jsonl"))
        return [path.relative_to(task.state_dir).as_posix() for path in found[:1]]

    def session_place(self, task: EngineTask, session_id: str, name: str) -> str:
        """The same place under CODEX_HOME: its date folders and name are the rollout's own."""
        return name

    async def start_early(self, task: EngineTask) -> EarlyCodex:
        """The app-server, its handshake and its thread before the workspace exists, all in
        the state folder: nothing of the workspace is read before `EarlyCodex.launch`."""
        session = await self._spawn(task, cwd=task.state_dir)
        try:
            await session.initialize()
            # The thread too, with the ask server connected: the first turn moves it into the
            # workspace (`turn/start` takes a cwd, which holds for the later turns).
            await session.open_thread(task, task.state_dir)
        except BaseException:
            # Cancelled (the clone stopped while Codex was still starting): nobody will hold
            # this session, so its process goes now.
            await session.abandon()
            raise
        return EarlyCodex(self, task, session)

    async def _spawn(self, task: EngineTask, cwd: Path) -> CodexSession:
        prepare_home(task)
        env = engine_env(task)
        found = shutil.which(self.program, path=env.get("PATH"))
        program = native_program(found) if found else Program(self.program)
        env.update(program.env)
        process, tree = await spawn_engine(
            program.path,
            ["app-server"],
            cwd=cwd,
            env=env,
            install_hint="install @openai/codex (scripts/install-engines does it for the tests)",
            run_as=task.run_as,
        )
        log.info("started codex app-server (pid %d) in %s", process.pid, cwd)
        return CodexSession(process, tree)


class EarlyCodex:
    """A Codex app-server past its handshake, its thread open in the state folder, waiting
    for its workspace (`EarlyStart`)."""

    def __init__(self, engine: CodexEngine, task: EngineTask, session: CodexSession) -> None:
        self._engine = engine
        self._task = task
        self._session = session

    async def launch(self, task: EngineTask) -> CodexSession:
        # Its config.toml was written for the early task: any other setting needs a new one.
        if attrs.evolve(task, prompt=self._task.prompt) != self._task:
            log.info("the task changed since codex started early: starting it again")
            await self.discard()
            return await self._engine.launch(task)
        await self._session.first_turn(task)
        return self._session

    async def discard(self) -> None:
        await self._session.stop()
