"""Following one engine session's events, so a scenario can wait for them in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TypeVar

from shadowclone.plugin.types import (
    EngineEvent,
    EngineSession,
    FinishedEvent,
    TextEvent,
    TurnEndedEvent,
)

log = logging.getLogger(__name__)

TURN_TIMEOUT_S = 120.0
"""Generous bound on one scripted turn, so a broken driver fails instead of hanging."""
STOP_TIMEOUT_S = 15.0
"""`stop()` must end the process tree "within seconds"; this only prevents a hang."""

E = TypeVar("E", bound=EngineEvent)


class Watch:
    """Follows one session's events in the background so a test can wait for them in order."""

    def __init__(self, session: EngineSession) -> None:
        self.session = session
        self.events: list[EngineEvent] = []
        self.ended = False
        self._cursor = 0
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            async for event in self.session.events():
                log.info("engine event: %r", event)
                async with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self.ended = True
                self._changed.notify_all()

    async def next(
        self,
        kind: type[E],
        where: Callable[[E], bool] = lambda _event: True,
        timeout: float = TURN_TIMEOUT_S,
    ) -> E:
        """The next event of `kind` (after the last one this returned) for which `where` holds."""
        async with asyncio.timeout(timeout), self._changed:
            while True:
                while self._cursor < len(self.events):
                    event = self.events[self._cursor]
                    self._cursor += 1
                    if isinstance(event, kind) and where(event):
                        return event
                if self.ended:
                    raise AssertionError(
                        f"the session ended without a matching {kind.__name__}: {self.events}"
                    )
                await self._changed.wait()

    async def turn_ended(self, timeout: float = TURN_TIMEOUT_S) -> TurnEndedEvent:
        """The next turn that ended on its own (not by an interrupt)."""
        return await self.next(TurnEndedEvent, lambda event: not event.interrupted, timeout)

    async def finished(self, timeout: float = TURN_TIMEOUT_S) -> FinishedEvent:
        return await self.next(FinishedEvent, timeout=timeout)

    def seen(self, kind: type[E]) -> list[E]:
        """Every event of `kind` so far."""
        return [event for event in self.events if isinstance(event, kind)]

    def texts(self) -> str:
        return "\n".join(event.text for event in self.seen(TextEvent))

    async def aclose(self) -> None:
        """Stop the session if it still runs and let the drain finish."""
        if not self.ended:
            await asyncio.wait_for(self.session.stop(), STOP_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
        if not self._task.done():
            self._task.cancel()
