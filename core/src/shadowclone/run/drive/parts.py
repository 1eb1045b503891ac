"""The parts of the engine's supervisor, each the state of one concern and what it does alone:
where the work stands, the engine's events, the owner's messages on their way in, the
questions about caps, the reviews between turns, and the stall clock. `supervise` wires them
and decides, from what they report, how the session goes on or ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from shadowclone.node.schemas import InboxKind, InboxLine, Step
from shadowclone.plugin.types import (
    EngineEvent,
    EngineSession,
    FinishedEvent,
    Outcome,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)
from shadowclone.run.drive.caps import CapGate
from shadowclone.run.drive.result import EngineResult, FollowUp, TurnStart
from shadowclone.run.progress import OpenQuestions, ProgressWriter

log = logging.getLogger(__name__)


class Work:
    """Where the engine's work stands, which every part reads: a turn running, the session
    closed, and when the engine last showed life (the stall clock's start)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.last_activity = self.loop.time()
        self.turn_running = True
        self.closed = False

    def now(self) -> float:
        return self.loop.time()

    def touch(self) -> None:
        """The engine (or the owner, for it) did something: the stall clock starts again."""
        self.last_activity = self.loop.time()


class EngineEvents:
    """The engine's events, read one at a time and written as progress lines."""

    def __init__(self, session: EngineSession, progress: ProgressWriter) -> None:
        self.progress = progress
        self.events = session.events()
        self.next: asyncio.Task[EngineEvent] | None = None
        self.last_text = ""

    def pull(self) -> asyncio.Task[EngineEvent]:
        return asyncio.create_task(_anext(self.events), name="next engine event")

    def record(self, event: EngineEvent) -> None:
        match event:
            case TextEvent(text=text):
                if text.strip():
                    self.last_text = text
                    self.progress.text(text)
            case ToolUseEvent(name=name, detail=detail):
                self.progress.tool(name, detail)
            case UsageEvent(input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost):
                self.progress.usage(tokens_in, tokens_out, cost)
            case TurnEndedEvent(interrupted=interrupted):
                said = "the turn was interrupted" if interrupted else "the turn ended"
                self.progress.note(Step.ENGINE, said)
            case FinishedEvent():
                pass

    async def drain(self, work: Work, deadline: float, stop_grace_s: float) -> str:
        """Record the events a stopping engine still sends, up to its finish; returns the
        finish's detail (the engine's last output)."""
        while self.next is not None:
            remaining = deadline - work.now()
            if remaining <= 0:
                log.warning("the engine gave no finish within %s s of its stop", stop_grace_s)
                return ""
            done, _ = await asyncio.wait({self.next}, timeout=remaining)
            if not done:
                continue
            try:
                event = self.next.result()
            except (StopAsyncIteration, Exception):  # noqa: BLE001 - it is stopping anyway
                self.next = None
                return ""
            self.record(event)
            if isinstance(event, FinishedEvent):
                self.next = None
                return event.detail
            self.next = self.pull()
        return ""

    async def close(self, stop_grace_s: float) -> None:
        aclose = getattr(self.events, "aclose", None)
        if aclose is not None:
            try:
                await asyncio.wait_for(aclose(), stop_grace_s)
            except Exception as error:  # noqa: BLE001 - the session is over; only say so
                log.warning("closing the engine's events failed: %r", error)


class Delivery:
    """The owner's delivered messages on their way to the engine: read one at a time, sent
    one at a time, and the ids of those the engine took."""

    def __init__(
        self,
        session: EngineSession,
        progress: ProgressWriter,
        messages: AsyncIterator[InboxLine] | None,
        work: Work,
    ) -> None:
        self.session = session
        self.progress = progress
        self.messages = messages
        self.work = work
        self.next: asyncio.Task[InboxLine] | None = None
        self.sending: asyncio.Task[None] | None = None
        self.sending_line: InboxLine | None = None
        self.taken: list[str] = []

    def pull(self) -> None:
        self.next = None
        if self.messages is not None and not self.work.closed and self.sending is None:
            self.next = asyncio.create_task(_anext(self.messages), name="next delivered message")

    def take(self, task: asyncio.Task[InboxLine]) -> InboxLine | None:
        """The message `task` read, to deliver; None when there is none to deliver (the
        messages ended or failed, or the line was no message: the next one is pulled)."""
        self.next = None
        try:
            line = task.result()
        except StopAsyncIteration:
            log.info("the source of messages has ended")
            self.messages = None
            return None
        except Exception as error:
            # The engine's work goes on; the owner learns that messages no longer reach it.
            log.exception("reading the delivered messages failed")
            self.progress.error(Step.ENGINE, f"messages can no longer reach the engine: {error!r}")
            self.messages = None
            return None
        if line.kind is not InboxKind.MESSAGE:
            log.warning("ignoring inbox line %s of kind %s", line.id, line.kind.value)
            self.pull()
            return None
        return line

    def deliver(self, line: InboxLine) -> None:
        log.info("delivering message %s to the engine", line.id)
        self.sending_line = line
        self.sending = asyncio.create_task(self.session.send(line.text), name=f"send {line.id}")
        self.work.turn_running = True

    def on_sent(self, task: asyncio.Task[None]) -> str | None:
        """Record a delivered message; on a failed send, return why."""
        self.sending = None
        error = task.exception()
        if error is not None:
            return f"the engine did not take a message from the owner: {error}"
        assert self.sending_line is not None
        self.taken.append(self.sending_line.id)
        self.progress.message(self.sending_line.text)
        self.work.touch()
        self.pull()
        return None

    def waiting(self) -> bool:
        """Whether a message is on its way to the engine, or read and about to be."""
        return self.sending is not None or (self.next is not None and self.next.done())

    async def stop_reading(self, stop_grace_s: float) -> None:
        if self.next is not None:
            self.next.cancel()
            await settle(self.next, stop_grace_s)
            self.next = None


class CapQuestions:
    """The owner's questions about a cap reached, as the supervisor follows them: the one
    open, the last one answered, and the turn held until the answer."""

    def __init__(self, gate: CapGate | None, work: Work) -> None:
        self.gate = gate
        self.work = work
        self.capping: asyncio.Task[bool] | None = None
        """The owner is asked about a cap reached; the engine waits."""
        self.next_turn: TurnStart | None = None
        """A turn held until the owner answers about the cap reached (its send)."""
        self.answered: asyncio.Task[bool] | None = None
        """The last question about a cap whose answer this loop took."""
        self.started: asyncio.Task[bool] | None = None
        """Wakes the loop when the model proxy meets a cap mid-turn and asks the owner."""
        if gate is not None:
            gate.working = lambda: work.turn_running and not work.closed

    def follow(self) -> None:
        """Follow the question the gate asks (this loop's, or the model proxy's mid-turn)."""
        gate = self.gate
        if gate is None:
            return
        if self.started is None or self.started.done():
            gate.started.clear()
            self.started = asyncio.create_task(gate.started.wait(), name="a cap met")
        asking = gate.asking
        if self.capping is None and asking is not None and asking is not self.answered:
            log.info("a cap is reached: %s", gate.reached.describe() if gate.reached else "?")
            self.capping = gate.asking

    def check(self, starting: bool = False) -> bool:
        """Whether a cap is reached now, while the engine works or (`starting`) as a turn is
        about to start: the owner is asked (once), and the engine waits."""
        if self.gate is None or self.work.closed or not (starting or self.work.turn_running):
            return False
        asking = self.gate.check()
        if asking is None:
            return False
        if asking is not self.capping and asking is not self.answered:
            self.capping = asking
        return True

    def note(self, event: EngineEvent) -> None:
        """Count the event towards the caps; a step of work may reach one."""
        if self.gate is not None:
            self.gate.watch.note(event)
            if isinstance(event, TextEvent | ToolUseEvent):
                self.check()

    def settle(self, task: asyncio.Task[bool]) -> None:
        """The owner answered `task`: no question is open."""
        self.capping, self.answered = None, task

    def release(self) -> TurnStart | None:
        """The turn held for the answer, now free to start."""
        held, self.next_turn = self.next_turn, None
        return held

    def said(self) -> str:
        assert self.gate is not None and self.gate.reached is not None
        return f"the clone reached {self.gate.reached.describe()}"


class Reviews:
    """The reviews between turns (`on_idle`), run with the session kept open, and whether
    the inbox may be closed (`close_inbox`)."""

    def __init__(
        self,
        on_idle: Callable[[], Coroutine[Any, Any, FollowUp | None]] | None,
        close_inbox: Callable[[frozenset[str], bool], Awaitable[bool]] | None,
    ) -> None:
        self.on_idle = on_idle
        self.close_inbox = close_inbox
        self.idle: asyncio.Task[FollowUp | None] | None = None
        """The reviews of the last turn, while they run."""
        self.stale = False
        """A message came while `idle` ran: its result is not the last turn's."""
        self.again = False
        """A turn ended while stale reviews still ran: run them again once they end."""
        self.waiting_since: float | None = None
        """When `close_inbox` last said a message is still on its way."""

    def start(self) -> None:
        """The turn ended with nothing waiting: run the reviews, the session kept open."""
        assert self.on_idle is not None
        if self.idle is not None:
            self.again = True  # stale reviews still run; these follow them
            return
        log.info("the turn ended; reviewing its result with the session kept open")
        self.stale = False
        self.idle = asyncio.create_task(self.on_idle(), name="between turns")

    def message_sent(self) -> None:
        """A message went to the engine: the reviews running now are of an earlier turn."""
        self.waiting_since = None
        if self.idle is not None:
            self.stale = True

    async def may_close(self, taken: list[str], force: bool, now: float) -> bool:
        """Whether the session may close: no accepted message is still on its way."""
        if self.close_inbox is not None and not await self.close_inbox(frozenset(taken), force):
            if self.waiting_since is None:
                self.waiting_since = now
            log.info("a message from the owner is on its way; keeping the session open")
            return False
        return True


class StallClock:
    """When the engine's silence is a stall: not while a question is open, nor while the
    engine waits for the owner or for its login, nor between turns."""

    def __init__(
        self,
        progress: ProgressWriter,
        stall_timeout_s: float,
        held: Callable[[], bool] | None,
        work: Work,
    ) -> None:
        self.questions = OpenQuestions(progress.folder)
        self.stall_timeout_s = stall_timeout_s
        self.held = held
        self.work = work
        self.last_check = work.last_activity

    def hold(self, capping: bool, now: float) -> None:
        """Start the clock again now if the engine waits on purpose."""
        if capping or (self.held is not None and self.held()):
            self.work.last_activity = now  # the engine waits for the owner, or for its login
        if self.questions.refresh() or self.questions.current():
            self.work.last_activity = now  # a question open or just settled holds the clock

    def stalled(self, now: float, sending: bool) -> str | None:
        """Why the engine's silence until `now` is a stall, or None while it is not one."""
        silent_s = now - self.work.last_activity
        if silent_s < self.stall_timeout_s:
            return None
        if sending:
            return f"the engine took no message for {silent_s:.0f} s"
        return f"no word from the engine for {silent_s:.0f} s"


class Ending:
    """How the supervisor ends the engine: stop the session, then wait, bounded, for the
    events it still sends up to its finish."""

    def __init__(
        self,
        session: EngineSession,
        progress: ProgressWriter,
        engine: EngineEvents,
        work: Work,
        stop_grace_s: float,
    ) -> None:
        self.session = session
        self.progress = progress
        self.engine = engine
        self.work = work
        self.stop_grace_s = stop_grace_s

    async def end(self, outcome: Outcome, detail: str) -> EngineResult:
        """Stop the session and wait, bounded, for its finish; `outcome` is ours to say."""
        log.info("ending the engine: %s (%s)", outcome.value, detail)
        if outcome is Outcome.STOPPED:
            self.progress.note(Step.ENGINE, f"stopping the engine: {detail}")
        else:
            self.progress.error(Step.ENGINE, f"stopping the engine: {detail}")
        deadline = self.work.now() + self.stop_grace_s
        error = await self.stop_session()
        if error is not None:
            self.progress.error(Step.ENGINE, f"stopping the engine failed: {error!r}")
        output = await self.engine.drain(self.work, deadline, self.stop_grace_s)
        if outcome is Outcome.FAILED and output and output not in detail:
            detail = f"{detail}\n{output}"
        return EngineResult(outcome, detail, self.engine.last_text)

    async def stop_session(self) -> Exception | None:
        try:
            await asyncio.wait_for(self.session.stop(), self.stop_grace_s)
        except Exception as error:  # noqa: BLE001 - stopping goes on; the caller says so
            log.warning("stopping the engine session failed: %r", error)
            return error
        return None


async def _anext(iterator: AsyncIterator[Any]) -> Any:
    return await iterator.__anext__()


async def settle(task: asyncio.Task[Any], timeout_s: float) -> None:
    """Wait, bounded, for a cancelled task to finish; what it ended with no longer matters."""
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        log.warning("task %s did not end within %s s of its cancel", task.get_name(), timeout_s)
    elif not task.cancelled() and task.exception() is not None:
        log.debug("task %s ended with %r", task.get_name(), task.exception())
