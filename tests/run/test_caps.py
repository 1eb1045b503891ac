"""CapWatch: a cap is reached exactly when what was used reaches it, paused time is not work,
and raising a cap adds its first value again."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.node.schemas import Caps
from shadowclone.plugin.types import TextEvent, TurnEndedEvent, UsageEvent
from shadowclone.run.drive.caps import CapKind, CapWatch


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
