"""A clone's caps (minutes of work, turns, cost): what has been used, and which cap is reached.

The run program pauses the engine when one is reached while it works (its next model request
waits at the model proxy) and asks the owner to raise that cap or to finish; time spent waiting
for the owner's answers does not count as work.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import attrs

from shadowclone.node.schemas import Caps, Price
from shadowclone.plugin.types import EngineEvent, EngineSession, TurnEndedEvent, UsageEvent


class CapKind(enum.StrEnum):
    MINUTES = "minutes"
    TURNS = "turns"
    COST = "cost"


@attrs.frozen
class Reached:
    kind: CapKind
    cap: float
    used: float

    def describe(self) -> str:
        return {
            CapKind.MINUTES: f"its time cap of {self.cap:g} minutes ({self.used:.1f} worked)",
            CapKind.TURNS: f"its cap of {self.cap:g} turns ({self.used:g} taken)",
            CapKind.COST: f"its cost cap of ${self.cap:g} (${self.used:.2f} spent)",
        }[self.kind]

    def step(self) -> str:
        """What raising it adds: as much again."""
        return {
            CapKind.MINUTES: f"{self.cap:g} minutes",
            CapKind.TURNS: f"{self.cap:g} turns",
            CapKind.COST: f"${self.cap:g}",
        }[self.kind]


@attrs.define
class CapWatch:
    caps: Caps
    clock: Callable[[], float] = time.monotonic
    cost_usd: float = 0.0
    turns: int = 0
    earlier_minutes: float = 0.0
    """Minutes worked by earlier launches of the clone (before a long usage limit)."""
    _started: float = attrs.field(init=False)
    _paused_s: float = 0.0
    _paused_at: float | None = None
    _steps: dict[CapKind, float] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        self._started = self.clock()
        self._steps = {
            kind: value
            for kind, value in (
                (CapKind.MINUTES, self.caps.minutes),
                (CapKind.TURNS, self.caps.turns),
                (CapKind.COST, self.caps.cost_usd),
            )
            if value is not None
        }

    def note(self, event: EngineEvent) -> None:
        if isinstance(event, UsageEvent):
            self.cost_usd += event.cost_usd or 0.0
        elif isinstance(event, TurnEndedEvent):
            self.turns += 1

    def minutes(self) -> float:
        paused = self._paused_s + (
            self.clock() - self._paused_at if self._paused_at is not None else 0.0
        )
        return self.earlier_minutes + (self.clock() - self._started - paused) / 60

    def reached(self) -> Reached | None:
        """The first cap reached, if any."""
        for kind, cap, used in (
            (CapKind.MINUTES, self.caps.minutes, self.minutes()),
            (CapKind.TURNS, self.caps.turns, float(self.turns)),
            (CapKind.COST, self.caps.cost_usd, self.cost_usd),
        ):
            if cap is not None and used >= cap:
                return Reached(kind, float(cap), used)
        return None

    def pause(self) -> None:
        if self._paused_at is None:
            self._paused_at = self.clock()

    def resume(self) -> None:
        if self._paused_at is not None:
            self._paused_s += self.clock() - self._paused_at
            self._paused_at = None

    def raise_cap(self, kind: CapKind) -> Caps:
        """Raise `kind`'s cap by its first value again; returns the caps now."""
        step = self._steps[kind]
        if kind is CapKind.MINUTES:
            assert self.caps.minutes is not None
            self.caps = attrs.evolve(self.caps, minutes=self.caps.minutes + step)
        elif kind is CapKind.TURNS:
            assert self.caps.turns is not None
            self.caps = attrs.evolve(self.caps, turns=self.caps.turns + int(step))
        else:
            assert self.caps.cost_usd is not None
            self.caps = attrs.evolve(self.caps, cost_usd=self.caps.cost_usd + step)
        return self.caps


class CapGate:
    """Where a reached cap holds the engine: nothing reaches the model past a cap until the
    owner raises it.

    The run program's model proxy awaits `admit` before each of the engine's requests leaves,
    whatever started it (a new turn, a tool's result, a retry), and the supervisor calls
    `check` before it starts a turn (failing checks sent back, a message). Either way the
    owner is asked once (`asking`); while the question waits the cap's minutes stand still.
    Raised, the held request goes; finished, it never does, and the supervisor ends the
    engine. Between turns (`working` false) requests pass: they are the reviews'."""

    def __init__(self, watch: CapWatch, ask: Callable[[Reached], Awaitable[bool]]) -> None:
        self.watch = watch
        self._ask = ask
        self.asking: asyncio.Task[bool] | None = None
        """The owner's question about the cap reached, while it is open or once it is
        answered `finish` (then it stays: nothing goes on)."""
        self.reached: Reached | None = None
        self.started = asyncio.Event()
        """Set when a question starts, for the supervisor to follow it."""
        self.working: Callable[[], bool] = lambda: True
        """Whether the engine is in a turn (the supervisor says)."""

    def check(self) -> asyncio.Task[bool] | None:
        """The question about a reached cap: the open one, a new one if a cap is reached
        now, or the one answered `finish`; None when the engine may go on."""
        if self.asking is not None and self.asking.done() and _raised(self.asking):
            self.asking = None
        if self.asking is not None:
            return self.asking
        reached = self.watch.reached()
        if reached is None:
            return None
        self.reached = reached
        self.watch.pause()
        self.asking = asyncio.create_task(self._asked(reached), name="a cap reached")
        self.started.set()
        return self.asking

    async def _asked(self, reached: Reached) -> bool:
        try:
            return await self._ask(reached)
        finally:
            self.watch.resume()

    async def admit(self) -> None:
        """Return when a model request of the engine may leave: at once, or once the owner
        raised the cap reached; never, once the owner said finish."""
        while self.working():
            asking = self.check()
            if asking is None:
                return
            await asyncio.wait({asking})
            if not _raised(asking):
                await asyncio.Event().wait()  # the engine is ended; this request never goes


def _raised(asking: asyncio.Task[bool]) -> bool:
    return not asking.cancelled() and asking.exception() is None and asking.result()


class PricedSession:
    """`session`, its usage without a cost priced by `price` (an engine that reports tokens
    only, as Codex does): so the clone's cost and its cost caps hold for every engine."""

    def __init__(self, session: EngineSession, price: Price) -> None:
        self.session = session
        self.price = price

    @property
    def session_id(self) -> str | None:
        return self.session.session_id

    async def events(self) -> AsyncIterator[EngineEvent]:
        async for event in self.session.events():
            if isinstance(event, UsageEvent) and event.cost_usd is None:
                cost = self.price.of(event.input_tokens, event.output_tokens)
                yield attrs.evolve(event, cost_usd=cost)
            else:
                yield event

    async def send(self, message: str) -> None:
        await self.session.send(message)

    async def close(self) -> None:
        await self.session.close()

    async def stop(self) -> None:
        await self.session.stop()


def priced(session: EngineSession, price: Price | None) -> EngineSession:
    return session if price is None else PricedSession(session, price)
