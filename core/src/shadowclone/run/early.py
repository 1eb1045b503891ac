"""The engine's early start: its program begun beside the target and workspace steps, where
the engine can (`StartsEarly`).

Apart from the run program's phases (run/program.py) because it spans them: begun before the
target step, taken by the working session, or discarded at the clone's end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import attrs

from shadowclone.errors import ShadowcloneError
from shadowclone.node.schemas import Request
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import EarlyStart, EngineTask, StartsEarly
from shadowclone.run.access import ModelAccess

log = logging.getLogger(__name__)

Started = tuple[EngineTask, EarlyStart]
"""The task the program was started for, and the program."""


class EarlyEngine:
    """The engine's program, started early; taken by the working session or discarded."""

    def __init__(
        self,
        registry: Registry,
        request: Request,
        access: ModelAccess,
        new_task: Callable[[], Awaitable[EngineTask]],
    ) -> None:
        self.registry = registry
        self.request = request
        self.access = access
        self.new_task = new_task
        """Makes a task for a new session with the web tools and no prompt yet."""
        self._early: asyncio.Task[Started | None] | None = None

    async def start(self) -> None:
        """Start the engine's program now if it can start before its workspace exists: its
        own start then runs beside the target and workspace steps."""
        try:
            engine = self.registry.engine(self.request.engine).factory()
        except ShadowcloneError:
            return  # said when the engine starts
        if isinstance(engine, StartsEarly):
            self._early = asyncio.create_task(self._start(engine), name="engine-early")
            # The task runs to its first wait before the target's first blocking step.
            await asyncio.sleep(0)

    async def _start(self, engine: StartsEarly) -> Started | None:
        try:
            # The early program reads nothing of the workspace; as most clones work on the
            # owner's head, it is started for that, and a review's task launches anew.
            task = attrs.evolve(await self.new_task(), project_settings=True)
            self.access.prepare_upstream()  # the engine may ask the provider while it starts
            early = await engine.start_early(task)
            log.info("the engine started early, beside the target and workspace steps")
            return task, early
        except Exception as error:  # noqa: BLE001 - any failure: the engine starts the usual way
            # The launch once the workspace is ready says what is wrong, where it belongs.
            log.warning("the engine could not start early: %s", error)
            return None

    async def take(self) -> Started | None:
        """The program started early, for the working session (None: there is none)."""
        early, self._early = self._early, None
        return None if early is None else await early

    async def discard(self) -> None:
        """End an engine started early that no session took (a handoff, a failure, a stop);
        one still starting is cancelled: the clone's end does not wait for it."""
        early, self._early = self._early, None
        if early is None:
            return
        early.cancel()
        (started,) = await asyncio.gather(early, return_exceptions=True)
        if isinstance(started, tuple):
            await started[1].discard()
