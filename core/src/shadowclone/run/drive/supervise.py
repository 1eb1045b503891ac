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
from shadowclone.run.progress import OpenQuestions, ProgressWriter

log = logging.getLogger(__name__)

FollowUp = Callable[[], str]
"""What the reviews between turns give the engine next: called as it is sent."""

STOP_GRACE_S = 30.0
"""How long a session may take to stop, or to say it finished after being stopped."""


@attrs.frozen
class EngineResult:
    """How the engine's work ended, for the run program's next steps and final report."""

    outcome: Outcome
    detail: str = ""
    """Why it ended so, for anything but done; for a failure, the engine's last output."""
    last_text: str = ""
    """The model's last words, the heart of the report."""
    taken: tuple[str, ...] = ()
    """Ids of the owner's messages the engine took, in order."""
    capped: str = ""
    """The cap that ended the work (the owner chose to finish, or did not answer), if one did."""


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
    close_inbox: Callable[[frozenset[str], bool], bool] | None = None,
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


TurnStart = Callable[[], Awaitable["EngineResult | None"]]
"""What starts the engine's next turn (sends it a message or the failing checks)."""


class _Supervisor:
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
        close_inbox: Callable[[frozenset[str], bool], bool] | None = None,
        gate: CapGate | None = None,
        held: Callable[[], bool] | None = None,
    ) -> None:
        self.session = session
        self.held = held
        self.gate = gate
        self.capping: asyncio.Task[bool] | None = None
        """The owner is asked about a cap reached; the engine waits."""
        self.next_turn: TurnStart | None = None
        """A turn held until the owner answers about the cap reached (its send)."""
        self.answered: asyncio.Task[bool] | None = None
        """The last question about a cap whose answer this loop took."""
        self.cap_started: asyncio.Task[bool] | None = None
        """Wakes the loop when the model proxy meets a cap mid-turn and asks the owner."""
        self.progress = progress
        self.messages = messages
        self.stop = stop
        self.stall_timeout_s = stall_timeout_s
        self.stop_grace_s = stop_grace_s
        self.questions = OpenQuestions(progress.folder)
        self.events = session.events()
        self.loop = asyncio.get_running_loop()
        self.last_activity = self.loop.time()
        self.last_check = self.last_activity
        self.last_text = ""
        self.closed = False
        self.next_event: asyncio.Task[EngineEvent] | None = None
        self.next_message: asyncio.Task[InboxLine] | None = None
        self.sending: asyncio.Task[None] | None = None
        self.sending_line: InboxLine | None = None
        self.taken: list[str] = []
        self.on_idle = on_idle
        self.close_inbox = close_inbox
        self.idle: asyncio.Task[FollowUp | None] | None = None
        """The reviews of the last turn, while they run."""
        self.idle_stale = False
        """A message came while `idle` ran: its result is not the last turn's."""
        self.idle_again = False
        """A turn ended while stale reviews still ran: run them again once they end."""
        self.turn_running = True
        self.waiting_since: float | None = None
        if gate is not None:
            gate.working = lambda: self.turn_running and not self.closed
        """When `close_inbox` last said a message is still on its way."""

    async def run(self, check_s: float) -> EngineResult:
        result = await self._run(check_s)
        return attrs.evolve(result, taken=tuple(self.taken))

    async def _run(self, check_s: float) -> EngineResult:
        stop_wait = asyncio.create_task(self.stop.wait(), name="stop signal")
        self.next_event = self._pull_event()
        self._pull_message()
        try:
            while True:
                waiting: set[asyncio.Future[Any]] = {stop_wait, self.next_event}
                self._follow_caps()
                for task in (
                    self.next_message,
                    self.sending,
                    self.idle,
                    self.capping,
                    self.cap_started,
                ):
                    if task is not None:
                        waiting.add(task)
                done, _ = await asyncio.wait(
                    waiting, timeout=check_s, return_when=asyncio.FIRST_COMPLETED
                )
                if stop_wait in done:
                    return await self._end(Outcome.STOPPED, "the owner stopped the clone")
                result = await self._on_done(done)
                if result is not None:
                    return result
                if self.loop.time() - self.last_check >= check_s:
                    result = await self._check_stall()
                    if result is not None:
                        return result
        except asyncio.CancelledError:
            await self._stop_session()  # whoever cancelled us must not leave the engine running
            raise
        except Exception as error:
            log.exception("supervising the engine failed")
            return await self._end(Outcome.FAILED, f"supervising the engine failed: {error!r}")
        finally:
            await self._tidy(stop_wait)

    async def _on_done(self, done: set[asyncio.Future[Any]]) -> EngineResult | None:
        # A message that arrived with the end of a turn must be seen first, so that the turn's
        # end does not close the session under it.
        if self.sending is not None and self.sending in done:
            result = self._on_sent(self.sending)
            if result is not None:
                return await self._end(Outcome.FAILED, result)
        if self.next_message is not None and self.next_message in done:
            self._on_message(self.next_message)
        assert self.next_event is not None
        if self.next_event in done:
            ended = await self._on_event(self.next_event)
            if ended is not None:
                return ended
        if self.idle is not None and self.idle in done:
            return await self._on_idle_done(self.idle)
        if self.capping is not None and self.capping in done:
            return await self._on_cap_answered(self.capping)
        return None

    # ------------------------------------------------------------------ caps

    def _follow_caps(self) -> None:
        """Follow the question the gate asks (this loop's, or the model proxy's mid-turn)."""
        gate = self.gate
        if gate is None:
            return
        if self.cap_started is None or self.cap_started.done():
            gate.started.clear()
            self.cap_started = asyncio.create_task(gate.started.wait(), name="a cap met")
        asking = gate.asking
        if self.capping is None and asking is not None and asking is not self.answered:
            log.info("a cap is reached: %s", gate.reached.describe() if gate.reached else "?")
            self.capping = gate.asking

    def _check_caps(self, starting: bool = False) -> bool:
        """Whether a cap is reached now, while the engine works or (`starting`) as a turn is
        about to start: the owner is asked (once), and the engine waits."""
        if self.gate is None or self.closed or not (starting or self.turn_running):
            return False
        asking = self.gate.check()
        if asking is None:
            return False
        if asking is not self.capping and asking is not self.answered:
            self.capping = asking
        return True

    async def _start_turn(self, send: TurnStart) -> EngineResult | None:
        """Start the engine's next turn with `send`, unless a cap is reached: then it waits
        for the owner's answer (and goes, the cap raised)."""
        if self._check_caps(starting=True):
            self.next_turn = send
            return None
        return await send()

    async def _on_cap_answered(self, task: asyncio.Task[bool]) -> EngineResult | None:
        self.capping, self.answered = None, task
        self.last_activity = self.loop.time()
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:
            return await self._end(Outcome.FAILED, f"asking about a cap failed: {error!r}")
        if task.result():
            held, self.next_turn = self.next_turn, None
            return None if held is None else await self._start_turn(held)
        assert self.gate is not None and self.gate.reached is not None
        said = f"the clone reached {self.gate.reached.describe()}"
        result = await self._end(Outcome.STOPPED, said)
        return attrs.evolve(result, capped=said)

    # ------------------------------------------------------------------ messages

    def _pull_message(self) -> None:
        self.next_message = None
        if self.messages is not None and not self.closed and self.sending is None:
            self.next_message = asyncio.create_task(
                _anext(self.messages), name="next delivered message"
            )

    def _on_message(self, task: asyncio.Task[InboxLine]) -> None:
        self.next_message = None
        try:
            line = task.result()
        except StopAsyncIteration:
            log.info("the source of messages has ended")
            self.messages = None
            return
        except Exception as error:
            # The engine's work goes on; the owner learns that messages no longer reach it.
            log.exception("reading the delivered messages failed")
            self.progress.error(Step.ENGINE, f"messages can no longer reach the engine: {error!r}")
            self.messages = None
            return
        if line.kind is not InboxKind.MESSAGE:
            log.warning("ignoring inbox line %s of kind %s", line.id, line.kind.value)
            self._pull_message()
            return
        if self._check_caps(starting=True):

            async def deliver() -> EngineResult | None:
                self._deliver(line)
                return None

            log.info("message %s waits for the owner's answer about the cap", line.id)
            self.next_turn = deliver
            return
        self._deliver(line)

    def _deliver(self, line: InboxLine) -> None:
        log.info("delivering message %s to the engine", line.id)
        self.sending_line = line
        self.sending = asyncio.create_task(self.session.send(line.text), name=f"send {line.id}")
        self.turn_running = True
        self.waiting_since = None
        if self.idle is not None:
            self.idle_stale = True  # the reviews running now are of a turn that is not the last
        self.last_activity = self.loop.time()

    def _on_sent(self, task: asyncio.Task[None]) -> str | None:
        """Record a delivered message; on a failed send, return why."""
        self.sending = None
        error = task.exception()
        if error is not None:
            return f"the engine did not take a message from the owner: {error}"
        assert self.sending_line is not None
        self.taken.append(self.sending_line.id)
        self.progress.message(self.sending_line.text)
        self.last_activity = self.loop.time()
        self._pull_message()
        return None

    # ------------------------------------------------------------------ events

    def _pull_event(self) -> asyncio.Task[EngineEvent]:
        return asyncio.create_task(_anext(self.events), name="next engine event")

    async def _on_event(self, task: asyncio.Task[EngineEvent]) -> EngineResult | None:
        try:
            event = task.result()
        except StopAsyncIteration:
            return await self._end(Outcome.FAILED, "the engine's events ended without a finish")
        except Exception as error:
            log.exception("reading the engine's events failed")
            return await self._end(Outcome.FAILED, f"reading the engine's events failed: {error}")
        self.last_activity = self.loop.time()
        self._record(event)
        if self.gate is not None:
            self.gate.watch.note(event)
            if isinstance(event, TextEvent | ToolUseEvent):
                self._check_caps()
        if isinstance(event, FinishedEvent):
            if event.outcome is Outcome.FAILED:
                self.progress.error(Step.ENGINE, f"the engine failed: {event.detail}")
            else:
                self.progress.note(Step.ENGINE, f"the engine ended: {event.outcome.value}")
            self.next_event = None
            return EngineResult(event.outcome, event.detail, self.last_text)
        self.next_event = self._pull_event()
        if isinstance(event, TurnEndedEvent) and not event.interrupted and not self.closed:
            await asyncio.sleep(0)  # let a message that is already read land first
            waiting = self.sending is not None or (
                self.next_message is not None and self.next_message.done()
            )
            if not waiting:
                if self.on_idle is None:
                    return await self._close()
                self.turn_running = False
                self._start_idle()
        return None

    # ------------------------------------------------------------------ between turns

    def _start_idle(self) -> None:
        """The turn ended with nothing waiting: run the reviews, the session kept open."""
        assert self.on_idle is not None
        if self.idle is not None:
            self.idle_again = True  # stale reviews still run; these follow them
            return
        log.info("the turn ended; reviewing its result with the session kept open")
        self.idle_stale = False
        self.idle = asyncio.create_task(self.on_idle(), name="between turns")

    async def _on_idle_done(self, task: asyncio.Task[FollowUp | None]) -> EngineResult | None:
        self.idle = None
        error = task.exception()
        if error is not None:
            return await self._end(Outcome.FAILED, f"the reviews failed: {error!r}")
        if self.idle_again:
            self.idle_again = False
            if not self.turn_running:
                self._start_idle()
            return None
        if self.idle_stale or self.turn_running or self.sending is not None:
            return None
        follow_up = task.result()
        if follow_up is not None:
            return await self._start_turn(lambda: self._send_follow_up(follow_up))
        return await self._close_if_all_taken(force=False)

    async def _send_follow_up(self, follow_up: FollowUp) -> EngineResult | None:
        try:
            await self.session.send(follow_up())
        except ShadowcloneError as refused:  # Refused: the session is ending
            return await self._end(Outcome.FAILED, f"the engine took no more work: {refused}")
        self.turn_running = True
        self.last_activity = self.loop.time()
        return None

    async def _close_if_all_taken(self, force: bool) -> EngineResult | None:
        """Close the session unless an accepted message is still on its way to the engine."""
        if self.close_inbox is not None and not self.close_inbox(frozenset(self.taken), force):
            if self.waiting_since is None:
                self.waiting_since = self.loop.time()
            log.info("a message from the owner is on its way; keeping the session open")
            return None
        return await self._close()

    def _record(self, event: EngineEvent) -> None:
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

    async def _close(self) -> EngineResult | None:
        """The turn ended and nothing waits to be said: let the engine finish and exit."""
        log.info("the turn ended with no message waiting; closing the session")
        self.closed = True
        if self.next_message is not None:
            self.next_message.cancel()
            await _settle(self.next_message, self.stop_grace_s)
            self.next_message = None
        try:
            await asyncio.wait_for(self.session.close(), self.stop_grace_s)
        except Exception as error:  # noqa: BLE001 - a broken close is a failed clone
            return await self._end(Outcome.FAILED, f"the engine could not be closed: {error!r}")
        return None

    # ------------------------------------------------------------------ stall and ending

    async def _check_stall(self) -> EngineResult | None:
        now = self.last_check = self.loop.time()
        self._check_caps()
        if self.capping is not None or (self.held is not None and self.held()):
            self.last_activity = now  # the engine waits for the owner, or for its login
        if self.questions.refresh() or self.questions.current():
            self.last_activity = now  # a question open or just settled holds the clock
        if not self.turn_running and not self.closed:
            self.last_activity = now  # between turns the engine has nothing to say
            waited = now - self.waiting_since if self.waiting_since is not None else 0.0
            if self.idle is None and waited >= self.stall_timeout_s:
                log.warning("an accepted message never arrived; closing the session")
                return await self._close_if_all_taken(force=True)
            return None
        silent_s = now - self.last_activity
        if silent_s < self.stall_timeout_s:
            return None
        if self.sending is not None:
            detail = f"the engine took no message for {silent_s:.0f} s"
        else:
            detail = f"no word from the engine for {silent_s:.0f} s"
        return await self._end(Outcome.STALLED, detail)

    async def _end(self, outcome: Outcome, detail: str) -> EngineResult:
        """Stop the session and wait, bounded, for its finish; `outcome` is ours to say."""
        log.info("ending the engine: %s (%s)", outcome.value, detail)
        if outcome is Outcome.STOPPED:
            self.progress.note(Step.ENGINE, f"stopping the engine: {detail}")
        else:
            self.progress.error(Step.ENGINE, f"stopping the engine: {detail}")
        deadline = self.loop.time() + self.stop_grace_s
        error = await self._stop_session()
        if error is not None:
            self.progress.error(Step.ENGINE, f"stopping the engine failed: {error!r}")
        output = await self._drain(deadline)
        if outcome is Outcome.FAILED and output and output not in detail:
            detail = f"{detail}\n{output}"
        return EngineResult(outcome, detail, self.last_text)

    async def _stop_session(self) -> Exception | None:
        try:
            await asyncio.wait_for(self.session.stop(), self.stop_grace_s)
        except Exception as error:  # noqa: BLE001 - stopping goes on; the caller says so
            log.warning("stopping the engine session failed: %r", error)
            return error
        return None

    async def _drain(self, deadline: float) -> str:
        """Record the events a stopping engine still sends, up to its finish; returns the
        finish's detail (the engine's last output)."""
        while self.next_event is not None:
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                log.warning("the engine gave no finish within %s s of its stop", self.stop_grace_s)
                return ""
            done, _ = await asyncio.wait({self.next_event}, timeout=remaining)
            if not done:
                continue
            try:
                event = self.next_event.result()
            except (StopAsyncIteration, Exception):  # noqa: BLE001 - it is stopping anyway
                self.next_event = None
                return ""
            self._record(event)
            if isinstance(event, FinishedEvent):
                self.next_event = None
                return event.detail
            self.next_event = self._pull_event()
        return ""

    async def _tidy(self, stop_wait: asyncio.Task[bool]) -> None:
        if self.idle is not None and not self.idle.done():
            # The reviews skip what is left once stopped; the running stage may finish.
            await asyncio.wait({self.idle}, timeout=self.stop_grace_s)
        tasks = (stop_wait, self.next_event, self.next_message, self.sending, self.idle)
        for task in (*tasks, self.capping):
            if task is not None and not task.done():
                task.cancel()
                await _settle(task, self.stop_grace_s)
        aclose = getattr(self.events, "aclose", None)
        if aclose is not None:
            try:
                await asyncio.wait_for(aclose(), self.stop_grace_s)
            except Exception as error:  # noqa: BLE001 - the session is over; only say so
                log.warning("closing the engine's events failed: %r", error)


async def _anext(iterator: AsyncIterator[Any]) -> Any:
    return await iterator.__anext__()


async def _settle(task: asyncio.Task[Any], timeout_s: float) -> None:
    """Wait, bounded, for a cancelled task to finish; what it ended with no longer matters."""
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        log.warning("task %s did not end within %s s of its cancel", task.get_name(), timeout_s)
    elif not task.cancelled() and task.exception() is not None:
        log.debug("task %s ended with %r", task.get_name(), task.exception())
