"""CapWatch: a cap is reached exactly when what was used reaches it, paused time is not work,
and raising a cap adds its first value again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Caps
from shadowclone.plugin.types import (
    EngineEvent,
    FinishedEvent,
    Outcome,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)
from shadowclone.run.drive.caps import CapGate, CapKind, CapWatch, Reached
from shadowclone.run.drive.supervise import FollowUp, supervise_engine
from shadowclone.run.progress import ProgressWriter


@attrs.define
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


caps = st.builds(
    Caps,
    # Quarters: sums of them are exact in binary floating point, so the edge is exact too.
    minutes=st.none() | st.integers(1, 400).map(lambda n: n / 4),
    turns=st.none() | st.integers(1, 20),
    cost_usd=st.none() | st.integers(1, 200).map(lambda n: n / 4),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("usage"), st.none() | st.integers(0, 20).map(lambda n: n / 4)),
        st.tuples(st.just("turn"), st.none()),
        st.tuples(st.just("text"), st.none()),
        st.tuples(st.just("work"), st.integers(0, 600).map(float)),
        st.tuples(st.just("paused"), st.integers(0, 3600).map(float)),
    ),
    max_size=40,
)


@given(caps=caps, steps=steps)
def test_a_cap_is_reached_exactly_when_used_up(caps: Caps, steps: list[tuple[str, object]]) -> None:
    clock = Clock()
    watch = CapWatch(caps, clock=clock)
    cost, turns, worked = 0.0, 0, 0.0
    for kind, value in steps:
        if kind == "usage":
            assert value is None or isinstance(value, float)
            watch.note(UsageEvent(1, 1, value))
            cost += value or 0.0
        elif kind == "turn":
            watch.note(TurnEndedEvent())
            turns += 1
        elif kind == "text":
            watch.note(TextEvent("hello"))
        elif kind == "work":
            assert isinstance(value, float)
            clock.now += value
            worked += value
        else:
            assert isinstance(value, float)
            watch.pause()
            clock.now += value
            watch.resume()
        expected = []
        if caps.minutes is not None and worked / 60 >= caps.minutes:
            expected.append(CapKind.MINUTES)
        if caps.turns is not None and turns >= caps.turns:
            expected.append(CapKind.TURNS)
        if caps.cost_usd is not None and cost >= caps.cost_usd:
            expected.append(CapKind.COST)
        reached = watch.reached()
        assert (reached.kind if reached else None) == (expected[0] if expected else None)
        if reached is not None:
            assert reached.used >= reached.cap


@given(caps=caps, times=st.integers(1, 5))
def test_raising_adds_the_first_value_again(caps: Caps, times: int) -> None:
    watch = CapWatch(caps, clock=Clock())
    for kind, first in (
        (CapKind.MINUTES, caps.minutes),
        (CapKind.TURNS, caps.turns),
        (CapKind.COST, caps.cost_usd),
    ):
        if first is None:
            continue
        for _ in range(times):
            raised = watch.raise_cap(kind)
        value = {CapKind.MINUTES: raised.minutes, CapKind.TURNS: raised.turns}.get(
            kind, raised.cost_usd
        )
        assert value is not None and abs(value - first * (times + 1)) < 1e-6


def test_time_spent_asking_is_not_work() -> None:
    clock = Clock()
    watch = CapWatch(Caps(minutes=1), clock=clock)
    clock.now += 50
    watch.pause()
    clock.now += 3600
    assert watch.minutes() < 1
    assert watch.reached() is None
    watch.resume()
    clock.now += 10
    reached = watch.reached()
    assert reached is not None and reached.kind is CapKind.MINUTES
    assert "time cap of 1 minutes" in reached.describe()


# ------------------------------------------------------------------ the gate, as a property


@attrs.define
class Turn:
    """What the simulated engine does in one turn: model requests, each after a tool call
    that took some minutes, and the turn's cost, reported at its end as Claude Code does."""

    requests: list[float]
    """The minutes of work before each request."""
    cost: float


@attrs.define
class SimulatedEngine:
    """An `EngineSession` that makes its model requests through the gate, as the model proxy
    lets them out, and notes every request and every turn started past a cap."""

    gate: CapGate
    turns: list[Turn]
    clock: Clock
    violations: list[str] = attrs.field(factory=list)
    requests: int = 0
    _queue: asyncio.Queue[object] = attrs.field(factory=asyncio.Queue)
    _next: asyncio.Queue[str] = attrs.field(factory=asyncio.Queue)
    _player: asyncio.Task[None] | None = None

    @property
    def session_id(self) -> str | None:
        return "simulated"

    def start(self) -> None:
        self._player = asyncio.create_task(self._play())

    async def _play(self) -> None:
        for index, turn in enumerate(self.turns):
            if index and await self._next.get() == "close":
                break
            for minutes in turn.requests:
                self.clock.now += minutes * 60
                await self.gate.admit()
                if self.gate.watch.reached() is not None:
                    self.violations.append("a request left at a reached cap")
                self.requests += 1
                self._queue.put_nowait(ToolUseEvent("Bash", "true"))
            self._queue.put_nowait(UsageEvent(1, 1, turn.cost))
            self._queue.put_nowait(TurnEndedEvent())
        else:
            await self._next.get()
        self._queue.put_nowait(FinishedEvent(Outcome.DONE))

    async def events(self) -> AsyncIterator[EngineEvent]:
        while True:
            event = await self._queue.get()
            assert isinstance(event, EngineEvent)
            yield event
            if isinstance(event, FinishedEvent):
                return

    async def send(self, message: str) -> None:
        if self.gate.watch.reached() is not None:
            self.violations.append(f"a turn started at a reached cap: {message}")
        self._next.put_nowait(message)

    async def close(self) -> None:
        self._next.put_nowait("close")

    async def stop(self) -> None:
        if self._player is not None:
            self._player.cancel()
        self._queue.put_nowait(FinishedEvent(Outcome.STOPPED))


turns_ = st.lists(
    st.builds(
        Turn,
        st.lists(st.integers(0, 4).map(lambda n: n / 4), max_size=3),
        st.integers(0, 8).map(lambda n: n / 4),
    ),
    min_size=1,
    max_size=6,
)


@given(
    caps=st.builds(
        Caps,
        minutes=st.none() | st.integers(1, 8).map(lambda n: n / 4),
        turns=st.none() | st.integers(1, 4),
        cost_usd=st.none() | st.integers(1, 12).map(lambda n: n / 4),
    ),
    turns=turns_,
    answers=st.lists(st.booleans(), max_size=8),
    follow_ups=st.lists(st.booleans(), max_size=8),
)
def test_no_model_request_and_no_turn_goes_past_a_cap_without_the_owners_word(
    tmp_path_factory: pytest.TempPathFactory,
    caps: Caps,
    turns: list[Turn],
    answers: list[bool],
    follow_ups: list[bool],
) -> None:
    """Whatever the turns, their requests, their costs, the follow-ups the reviews give and
    the owner's answers: no request leaves and no turn starts while a cap is reached, and each
    cap reached is answered before anything more happens."""
    folder = RunFolder(tmp_path_factory.mktemp("run"))
    given_answers: list[bool] = []
    said = iter(answers)

    async def simulate() -> tuple[SimulatedEngine, str]:
        clock = Clock()
        watch = CapWatch(caps, clock=clock)

        async def ask(reached: Reached) -> bool:
            raise_it = next(said, False)
            given_answers.append(raise_it)
            if raise_it:
                watch.raise_cap(reached.kind)
            return raise_it

        gate = CapGate(watch, ask)
        engine = SimulatedEngine(gate, turns, clock)
        engine.start()
        left = iter(follow_ups)

        async def reviews() -> FollowUp | None:
            return (lambda: "the checks failed") if next(left, False) else None

        result = await asyncio.wait_for(
            supervise_engine(
                engine,
                ProgressWriter(folder, lambda text: text),
                None,
                asyncio.Event(),
                60,
                check_s=0.05,
                on_idle=reviews,
                gate=gate,
            ),
            timeout=20,
        )
        return engine, result.capped

    engine, capped = asyncio.run(simulate())
    assert engine.violations == []
    assert bool(capped) == (False in given_answers), "finish ends the work, naming the cap"
