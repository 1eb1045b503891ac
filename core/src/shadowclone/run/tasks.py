"""The tasks the engine's sessions are launched with: the working session's, a review's
consultation's, an early start's.

Apart from the run program's phases (run/program.py) because every phase that launches the
engine makes one the same way: its own state folder, its login (`ModelAccess`), its home and
the ask server's address.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from shadowclone.node.schemas import Request
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import EngineLimits, EngineTask
from shadowclone.run.access import ModelAccess
from shadowclone.run.ask import ask_command
from shadowclone.run.ask.http import AskService
from shadowclone.run.identity import EngineIdentity

log = logging.getLogger(__name__)


class Tasks:
    """Makes the engine's tasks, and keeps the state folders made for them."""

    def __init__(
        self,
        registry: Registry,
        request: Request,
        identity: EngineIdentity,
        access: ModelAccess,
        ask_service: AskService,
        places: tuple[Path, Path, Path],
        ask_outbox: Path,
        trusted_head: Callable[[], bool],
    ) -> None:
        """`places`: the run folder, the workspace and the engine's corner of the run
        folder; `trusted_head`: whether the engine may load the repository's settings."""
        self.registry = registry
        self.request = request
        self.identity = identity
        self.access = access
        self.ask_service = ask_service
        self.folder_path, self.workspace_path, self.engine_area = places
        self.ask_outbox = ask_outbox
        self.trusted_head = trusted_head
        self.state_dirs: list[Path] = []
        """The state folders made for the sessions (removed at the clone's end)."""
        self.served = False
        """Whether the ask server is served from this process."""

    async def serve_asks(self) -> None:
        """Serve the ask server; should it fail to (no loopback port), the engine starts the
        stdio server from `ask_command` itself."""
        try:
            await self.ask_service.start()
        except OSError as error:
            log.warning("the ask server could not start in-process: %s", error)
        else:
            self.served = True

    async def new(
        self, prompt: str, web_tools: bool, resume: str = "", state_dir: Path | None = None
    ) -> EngineTask:
        """The task for a new session, or for going on with session `resume`, whose files the
        engine keeps in `state_dir`."""
        engine = self.registry.engine(self.request.engine)
        login = self.registry.secret_provider(self.request.login)
        if state_dir is None:
            state_dir = Path(tempfile.mkdtemp(prefix="state-", dir=self.engine_area))
            self.identity.share(state_dir)
            self.state_dirs.append(state_dir)
        env = await self.access.login_env(engine, login, state_dir)
        # The environment's remoteEnv, under every variable the login sets.
        for name, value in self.request.lifecycle.environment(os.environ).items():
            env.setdefault(name, value)
        # A home of its own, isolated or not: nothing of the run program's user's shell setup
        # (a login shell's init, its locks and caches) is the engine's to run or to hold.
        env.update({"HOME": str(self.engine_area / "home"), "TMPDIR": str(state_dir)})
        ask_url, ask_headers = (
            (self.ask_service.url, self.ask_service.headers) if self.served else ("", {})
        )
        return EngineTask(
            workspace=self.workspace_path,
            prompt=prompt,
            ask_command=ask_command(self.folder_path, self.request.ask_timeout_s, self.ask_outbox),
            ask_url=ask_url,
            ask_headers=ask_headers,
            env=env,
            state_dir=state_dir,
            model=self.request.model,
            web_tools=web_tools,
            project_settings=self.trusted_head(),
            limits=EngineLimits(ask_timeout_s=self.request.ask_timeout_s),
            run_as=self.identity.argv_prefix(),
            resume=resume,
        )

    async def for_early_start(self) -> EngineTask:
        """The task an early engine starts for: no prompt yet, the web tools on."""
        return await self.new("", web_tools=True)

    async def for_consultation(self, prompt: str) -> EngineTask:
        """A review's consultation: a session of its own, without web tools."""
        return await self.new(prompt, web_tools=False)
