"""superviseEngine: run one engine session to its end, whatever happens.

It writes each engine event as a progress line, hands each delivered owner's message to the
session once, and ends in one clear outcome: the engine finished (done), the owner stopped the
clone (stopped), the engine went silent (stalled), or the engine broke (failed). Every wait is
bounded, so a clone never hangs here.

The stall clock does not run while a question is open: the ask tool blocks the engine, without
events, for as long as the owner may take to answer.

With `on_idle` (the run program's reviews), the session stays open after a turn ends: the
reviews run while messages are still taken, and a message that arrives then starts a new turn
of the same session (the reviews then run again on its result). The session is closed only
once the reviews of the last turn are done and `close_inbox` says no accepted message is
still on its way; from then on `send` refuses. So an accepted message always reaches the
engine, or the report says why it did not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import attrs

from shadowclone.errors import ShadowcloneError
from shadowclone.node.schemas import InboxLine, Step
from shadowclone.plugin.types import (
    EngineEvent,
    EngineSession,
    FinishedEvent,
    Outcome,
    TurnEndedEvent,
)
from shadowclone.run.drive.caps import CapGate
from shadowclone.run.drive.parts import (
    CapQuestions,
    Delivery,
    Ending,
    EngineEvents,
    Reviews,
    StallClock,
    Work,
    settle,
)
from shadowclone.run.drive.result import EngineResult, FollowUp, TurnStart
from shadowclone.run.progress import ProgressWriter

__all__ = ["STOP_GRACE_S", "EngineResult", "FollowUp", "supervise_engine"]

log = logging.getLogger(__name__)

STOP_GRACE_S = 30.0
"""How long a session may take to stop, or to say it finished after being stopped."""


async def supervise_engine(
    session: EngineSession,
    progress: ProgressWriter,
    messages: AsyncIterator[InboxLine] | None,
    stop: asyncio.Event,
    stall_timeout_s: float,
    *,
    stop_grace_s: float = STOP_GRACE_S,
    check_s: float | None = None,
    on_idle: Callable[[], Coroutine[Any, Any, FollowUp | None]] | None = None,
    close_inbox: Callable[[frozenset[str], bool], Awaitable[bool]] | None = None,
    gate: CapGate | None = None,
    held: Callable[[], bool] | None = None,
) -> EngineResult:
    """Drive `session` (already launched) until it ends, and say how it ended.

    `messages` yields the owner's delivered messages (answers go to the ask server, and are
    ignored here); `stop` is set when the owner stops the clone; `stall_timeout_s` is how long
    the engine may stay silent with no question open. `check_s` is how often the stall clock
    and the open questions are looked at (default: a quarter of the stall timeout, at most 5 s).
    `on_idle` runs each time a turn ends with nothing waiting (the session stays open
    meanwhile); the follow-up it may return (failing checks) makes the session's next turn
    when it is sent, which it is not when a message made those reviews stale.
    `close_inbox(taken, force)` is asked before the session is closed: it returns False while
    an accepted message is not yet among `taken` (unless `force`), and once it returns True
    no message is accepted any more. `gate` holds the engine at its caps: a turn starts only
    when no cap is reached, and while the owner is asked about one (the stall clock held
    meanwhile) the engine's requests wait at the model proxy; raised, the work goes on,
    finished, it ends with the cap named. While `held()` is true the engine waits on purpose
    (its login's usage limit), and the stall clock is held.
    """
    supervisor = _Supervisor(
        session,
        progress,
        messages,
        stop,
        stall_timeout_s=stall_timeout_s,
        stop_grace_s=stop_grace_s,
        on_idle=on_idle,
        close_inbox=close_inbox,
        gate=gate,
        held=held,
    )
    if check_s is None:
        check_s = min(max(stall_timeout_s / 4, 0.05), 5.0)
    return await supervisor.run(check_s)


class _Supervisor:
    """The loop that waits on everything at once and decides; its parts keep the state."""

    def __init__(
        self,
        session: EngineSession,
        progress: ProgressWriter,
        messages: AsyncIterator[InboxLine] | None,
        stop: asyncio.Event,
        *,
        stall_timeout_s: float,
        stop_grace_s: float,
        on_idle: Callable[[], Coroutine[Any, Any, FollowUp | None]] | None = None,
        close_inbox: Callable[[frozenset[str], bool], Awaitable[bool]] | None = None,
        gate: CapGate | None = None,
        held: Callable[[], bool] | None = None,
    ) -> None:
        self.session = session
        self.progress = progress
        self.stop = stop
        self.stop_grace_s = stop_grace_s
        self.work = Work()
        self.stall = StallClock(progress, stall_timeout_s, held, self.work)
        self.engine = EngineEvents(session, progress)
        self.inbox = Delivery(session, progress, messages, self.work)
        self.caps = CapQuestions(gate, self.work)
        self.reviews = Reviews(on_idle, close_inbox)
        self.ending = Ending(session, progress, self.engine, self.work, stop_grace_s)

    async def run(self, check_s: float) -> EngineResult:
        result = await self._run(check_s)
        return attrs.evolve(result, taken=tuple(self.inbox.taken))

    async def _run(self, check_s: float) -> EngineResult:
        stop_wait = asyncio.create_task(self.stop.wait(), name="stop signal")
        self.engine.next = self.engine.pull()
        self.inbox.pull()
        try:
            while True:
                waiting: set[asyncio.Future[Any]] = {stop_wait, self.engine.next}
                self.caps.follow()
                for task in (
                    self.inbox.next,
                    self.inbox.sending,
                    self.reviews.idle,
                    self.caps.capping,
                    self.caps.started,
                ):
                    if task is not None:
                        waiting.add(task)
                done, _ = await asyncio.wait(
                    waiting, timeout=check_s, return_when=asyncio.FIRST_COMPLETED
                )
                if stop_wait in done:
                    return await self.ending.end(Outcome.STOPPED, "the owner stopped the clone")
                result = await self._on_done(done)
                if result is not None:
                    return result
                if self.work.now() - self.stall.last_check >= check_s:
                    result = await self._check_stall()
                    if result is not None:
                        return result
        except asyncio.CancelledError:
            await (
                self.ending.stop_session()
            )  # whoever cancelled us must not leave the engine running
            raise
        except Exception as error:
            log.exception("supervising the engine failed")
            return await self.ending.end(
                Outcome.FAILED, f"supervising the engine failed: {error!r}"
            )
        finally:
            await self._tidy(stop_wait)

    async def _on_done(self, done: set[asyncio.Future[Any]]) -> EngineResult | None:
        # A message that arrived with the end of a turn must be seen first, so that the turn's
        # end does not close the session under it.
        if self.inbox.sending is not None and self.inbox.sending in done:
            result = self.inbox.on_sent(self.inbox.sending)
            if result is not None:
                return await self.ending.end(Outcome.FAILED, result)
        if self.inbox.next is not None and self.inbox.next in done:
            self._on_message(self.inbox.next)
        assert self.engine.next is not None
        if self.engine.next in done:
            ended = await self._on_event(self.engine.next)
            if ended is not None:
                return ended
        if self.reviews.idle is not None and self.reviews.idle in done:
            return await self._on_idle_done(self.reviews.idle)
        if self.caps.capping is not None and self.caps.capping in done:
            return await self._on_cap_answered(self.caps.capping)
        return None

    # ------------------------------------------------------------------ caps

    async def _start_turn(self, send: TurnStart) -> EngineResult | None:
        """Start the engine's next turn with `send`, unless a cap is reached: then it waits
        for the owner's answer (and goes, the cap raised)."""
        if self.caps.check(starting=True):
            self.caps.next_turn = send
            return None
        return await send()

    async def _on_cap_answered(self, task: asyncio.Task[bool]) -> EngineResult | None:
        self.caps.settle(task)
        self.work.touch()
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:
            return await self.ending.end(Outcome.FAILED, f"asking about a cap failed: {error!r}")
        if task.result():
            held = self.caps.release()
            return None if held is None else await self._start_turn(held)
        said = self.caps.said()
        result = await self.ending.end(Outcome.STOPPED, said)
        return attrs.evolve(result, capped=said)

    # ------------------------------------------------------------------ messages

    def _on_message(self, task: asyncio.Task[InboxLine]) -> None:
        line = self.inbox.take(task)
        if line is None:
            return
        if self.caps.check(starting=True):

            async def deliver() -> EngineResult | None:
                self._deliver(line)
                return None

            log.info("message %s waits for the owner's answer about the cap", line.id)
            self.caps.next_turn = deliver
            return
        self._deliver(line)

    def _deliver(self, line: InboxLine) -> None:
        self.inbox.deliver(line)
        self.reviews.message_sent()
        self.work.touch()

    # ------------------------------------------------------------------ events

    async def _on_event(self, task: asyncio.Task[EngineEvent]) -> EngineResult | None:
        try:
            event = task.result()
        except StopAsyncIteration:
            return await self.ending.end(
                Outcome.FAILED, "the engine's events ended without a finish"
            )
        except Exception as error:
            log.exception("reading the engine's events failed")
            return await self.ending.end(
                Outcome.FAILED, f"reading the engine's events failed: {error}"
            )
        self.work.touch()
        self.engine.record(event)
        self.caps.note(event)
        if isinstance(event, FinishedEvent):
            if event.outcome is Outcome.FAILED:
                self.progress.error(Step.ENGINE, f"the engine failed: {event.detail}")
            else:
                self.progress.note(Step.ENGINE, f"the engine ended: {event.outcome.value}")
            self.engine.next = None
            return EngineResult(event.outcome, event.detail, self.engine.last_text)
        self.engine.next = self.engine.pull()
        if isinstance(event, TurnEndedEvent) and not event.interrupted and not self.work.closed:
            await asyncio.sleep(0)  # let a message that is already read land first
            if not self.inbox.waiting():
                if self.reviews.on_idle is None:
                    return await self._close()
                self.work.turn_running = False
                self.reviews.start()
        return None

    # ------------------------------------------------------------------ between turns

    async def _on_idle_done(self, task: asyncio.Task[FollowUp | None]) -> EngineResult | None:
        reviews = self.reviews
        reviews.idle = None
        error = task.exception()
        if error is not None:
            return await self.ending.end(Outcome.FAILED, f"the reviews failed: {error!r}")
        if reviews.again:
            reviews.again = False
            if not self.work.turn_running:
                reviews.start()
            return None
        if reviews.stale or self.work.turn_running or self.inbox.sending is not None:
            return None
        follow_up = task.result()
        if follow_up is not None:
            return await self._start_turn(lambda: self._send_follow_up(follow_up))
        return await self._close_if_all_taken(force=False)

    async def _send_follow_up(self, follow_up: FollowUp) -> EngineResult | None:
        try:
            await self.session.send(follow_up())
        except ShadowcloneError as refused:  # Refused: the session is ending
            return await self.ending.end(Outcome.FAILED, f"the engine took no more work: {refused}")
        self.work.turn_running = True
        self.work.touch()
        return None

    async def _close_if_all_taken(self, force: bool) -> EngineResult | None:
        """Close the session unless an accepted message is still on its way to the engine."""
        if not await self.reviews.may_close(self.inbox.taken, force, self.work.now()):
            return None
        return await self._close()

    async def _close(self) -> EngineResult | None:
        """The turn ended and nothing waits to be said: let the engine finish and exit."""
        log.info("the turn ended with no message waiting; closing the session")
        self.work.closed = True
        await self.inbox.stop_reading(self.stop_grace_s)
        try:
            await asyncio.wait_for(self.session.close(), self.stop_grace_s)
        except Exception as error:  # noqa: BLE001 - a broken close is a failed clone
            return await self.ending.end(
                Outcome.FAILED, f"the engine could not be closed: {error!r}"
            )
        return None

    # ------------------------------------------------------------------ stall and ending

    async def _check_stall(self) -> EngineResult | None:
        now = self.stall.last_check = self.work.now()
        self.caps.check()
        self.stall.hold(self.caps.capping is not None, now)
        if not self.work.turn_running and not self.work.closed:
            self.work.last_activity = now  # between turns the engine has nothing to say
            since = self.reviews.waiting_since
            waited = now - since if since is not None else 0.0
            if self.reviews.idle is None and waited >= self.stall.stall_timeout_s:
                log.warning("an accepted message never arrived; closing the session")
                return await self._close_if_all_taken(force=True)
            return None
        stalled = self.stall.stalled(now, sending=self.inbox.sending is not None)
        return None if stalled is None else await self.ending.end(Outcome.STALLED, stalled)

    async def _tidy(self, stop_wait: asyncio.Task[bool]) -> None:
        idle = self.reviews.idle
        if idle is not None and not idle.done():
            # The reviews skip what is left once stopped; the running stage may finish.
            await asyncio.wait({idle}, timeout=self.stop_grace_s)
        tasks = (
            stop_wait,
            self.engine.next,
            self.inbox.next,
            self.inbox.sending,
            self.reviews.idle,
            self.caps.capping,
        )
        for task in tasks:
            if task is not None and not task.done():
                task.cancel()
                await settle(task, self.stop_grace_s)
        await self.engine.close(self.stop_grace_s)
