"""supervise_engine against a small in-memory engine session."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ChosenBy, InboxKind, InboxLine, ProgressKind, ProgressLine
from shadowclone.plugin.types import (
    EngineEvent,
    FinishedEvent,
    Outcome,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)
from shadowclone.run.drive import EngineResult, supervise_engine
from shadowclone.run.inbox import delivered
from shadowclone.run.progress import ProgressWriter

pytestmark = pytest.mark.anyio

BOUND_S = 10.0
"""A generous bound that turns a hang into a failure; no test depends on speed."""


@pytest.fixture
def progress(sc_folder: RunFolder) -> ProgressWriter:
    return ProgressWriter(sc_folder, lambda text: text.replace("s3cret", "***"))


class FakeSession:
    """An engine session whose events the test scripts; `on_send` plays the engine's reply."""

    def __init__(self, *script: EngineEvent) -> None:
        self.queue: asyncio.Queue[EngineEvent | Exception] = asyncio.Queue()
        self.sent: list[str] = []
        self.closed = False
        self.stopped = False
        self.on_send: Callable[[str], None] = lambda _message: None
        self.session_id: str | None = "scripted-session"
        self.emit(*script)

    def emit(self, *events: EngineEvent | Exception) -> None:
        for event in events:
            self.queue.put_nowait(event)

    def events(self) -> AsyncIterator[EngineEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[EngineEvent]:
        while True:
            event = await self.queue.get()
            if isinstance(event, Exception):
                raise event
            yield event
            if isinstance(event, FinishedEvent):
                return

    async def send(self, message: str) -> None:
        self.sent.append(message)
        self.on_send(message)

    async def close(self) -> None:
        self.closed = True
        self.emit(FinishedEvent(Outcome.DONE))

    async def stop(self) -> None:
        self.stopped = True
        self.emit(FinishedEvent(Outcome.STOPPED, "killed"))


async def supervise(
    session: FakeSession,
    progress: ProgressWriter,
    messages: AsyncIterator[InboxLine] | None = None,
    stop: asyncio.Event | None = None,
    stall_timeout_s: float = 60.0,
) -> EngineResult:
    return await asyncio.wait_for(
        supervise_engine(
            session,
            progress,
            messages,
            stop or asyncio.Event(),
            stall_timeout_s,
            stop_grace_s=2.0,
            check_s=0.05,
        ),
        BOUND_S,
    )


def lines(folder: RunFolder) -> list[ProgressLine]:
    read, problems, _ = folder.progress()
    assert problems == []
    return read


def kinds(folder: RunFolder) -> list[ProgressKind]:
    return [line.kind for line in lines(folder)]


def deliver(folder: RunFolder, line: InboxLine) -> None:
    files.append_line(folder.deliveries_file, schemas.dumps(line))


async def test_a_turn_that_ends_closes_the_session_and_is_done(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(
        TextEvent("looking at the s3cret code"),
        ToolUseEvent("Bash", "ls"),
        UsageEvent(100, 20, 0.01),
        TextEvent("All done: fixed the bug."),
        TurnEndedEvent(),
    )
    result = await supervise(session, progress)
    assert result == EngineResult(Outcome.DONE, "", "All done: fixed the bug.")
    assert session.closed
    assert not session.stopped
    assert kinds(sc_folder) == [
        ProgressKind.TEXT,
        ProgressKind.TOOL,
        ProgressKind.USAGE,
        ProgressKind.TEXT,
        ProgressKind.NOTE,
        ProgressKind.NOTE,
    ]
    written = lines(sc_folder)
    assert written[0].text == "looking at the *** code"
    assert written[1].text == "Bash: ls"
    assert all(line.step.value == "engine" for line in written)


async def test_a_message_mid_turn_is_delivered_once(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(TextEvent("working"))

    def reply(message: str) -> None:
        session.emit(TextEvent(f"got it: {message}"), TurnEndedEvent())

    session.on_send = reply
    answer = InboxLine(id="a1", kind=InboxKind.ANSWER, text="yes", question_id="q1")
    deliver(sc_folder, answer)  # answers are the ask server's; the supervisor never sees them
    deliver(sc_folder, InboxLine(id="m1", kind=InboxKind.MESSAGE, text="also fix the docs"))
    source = delivered(sc_folder, {InboxKind.MESSAGE}, poll_s=0.1)
    async with contextlib.aclosing(source) as messages:
        result = await supervise(session, progress, messages)
    assert session.sent == ["also fix the docs"]
    assert result.outcome is Outcome.DONE
    assert result.last_text == "got it: also fix the docs"
    [message] = [line for line in lines(sc_folder) if line.kind is ProgressKind.MESSAGE]
    assert message.text == "also fix the docs"


async def test_a_message_waiting_when_the_turn_ends_starts_the_next_turn(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(TurnEndedEvent())
    session.on_send = lambda message: session.emit(
        TextEvent(f"next turn: {message}"), TurnEndedEvent()
    )

    async def one_message() -> AsyncIterator[InboxLine]:
        yield InboxLine(id="m1", kind=InboxKind.MESSAGE, text="one more thing")
        await asyncio.Event().wait()

    result = await supervise(session, progress, one_message())
    assert session.sent == ["one more thing"]
    assert result == EngineResult(Outcome.DONE, "", "next turn: one more thing", taken=("m1",))


async def test_a_stop_stops_the_session(sc_folder: RunFolder, progress: ProgressWriter) -> None:
    stop = asyncio.Event()
    session = FakeSession(TextEvent("working"))
    session.on_send = lambda _message: stop.set()
    session.emit(TextEvent("still working"))

    async def stop_soon() -> AsyncIterator[InboxLine]:
        yield InboxLine(id="m1", kind=InboxKind.MESSAGE, text="please stop")
        await asyncio.Event().wait()

    result = await supervise(session, progress, stop_soon(), stop)
    assert result.outcome is Outcome.STOPPED
    assert session.stopped
    assert not session.closed
    assert result.last_text == "still working"


async def test_a_stop_before_anything_happens(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    stop = asyncio.Event()
    stop.set()
    session = FakeSession()
    result = await supervise(session, progress, None, stop)
    assert result.outcome is Outcome.STOPPED
    assert session.stopped


async def test_silence_is_a_stall(sc_folder: RunFolder, progress: ProgressWriter) -> None:
    session = FakeSession(TextEvent("thinking very hard"))
    result = await supervise(session, progress, stall_timeout_s=0.3)
    assert result.outcome is Outcome.STALLED
    assert "no word from the engine" in result.detail
    assert session.stopped
    assert result.last_text == "thinking very hard"
    assert lines(sc_folder)[-1].kind is ProgressKind.ERROR


async def test_the_engine_dying_is_a_failure_with_its_output(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(
        TextEvent("working"),
        FinishedEvent(Outcome.FAILED, "Traceback: segfault in s3cret module"),
    )
    result = await supervise(session, progress)
    assert result.outcome is Outcome.FAILED
    assert result.detail == "Traceback: segfault in s3cret module"
    assert not session.closed
    error = lines(sc_folder)[-1]
    assert error.kind is ProgressKind.ERROR
    assert error.text == "the engine failed: Traceback: segfault in *** module"


async def test_a_broken_driver_is_a_failure(sc_folder: RunFolder, progress: ProgressWriter) -> None:
    session = FakeSession(TextEvent("working"))
    session.emit(RuntimeError("the pipe broke"))
    result = await supervise(session, progress)
    assert result.outcome is Outcome.FAILED
    assert "the pipe broke" in result.detail
    assert session.stopped


async def test_a_failed_send_is_a_failure(sc_folder: RunFolder, progress: ProgressWriter) -> None:
    session = FakeSession(TextEvent("working"))

    def refuse(_message: str) -> None:
        raise BrokenPipeError("stdin is closed")

    session.on_send = refuse

    async def one_message() -> AsyncIterator[InboxLine]:
        yield InboxLine(id="m1", kind=InboxKind.MESSAGE, text="hello")
        await asyncio.Event().wait()

    result = await supervise(session, progress, one_message())
    assert result.outcome is Outcome.FAILED
    assert "stdin is closed" in result.detail
    assert ProgressKind.MESSAGE not in kinds(sc_folder)


async def test_an_open_question_holds_the_stall_clock(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(TextEvent("I need to ask"))

    async def owner_answers_late() -> None:
        # The ask server's part: a question line, a long silence, then the answer line.
        asked = progress.question("keep the API?", ["keep", "drop"], "keep", timeout_s=60)
        await asyncio.sleep(1.5)  # five stall timeouts
        progress.answer(asked.id, "drop", ChosenBy.OWNER)
        session.emit(TextEvent("dropping it"), TurnEndedEvent())

    owner = asyncio.ensure_future(owner_answers_late())
    result = await supervise(session, progress, stall_timeout_s=0.3)
    await owner
    assert result == EngineResult(Outcome.DONE, "", "dropping it")


async def test_the_stall_clock_runs_again_after_the_answer(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(TextEvent("I need to ask"))
    asked = progress.question("keep the API?", ["keep", "drop"], "keep", timeout_s=60)

    async def answer_soon() -> None:
        await asyncio.sleep(0.5)
        progress.answer(asked.id, "keep", ChosenBy.TIMEOUT)

    answering = asyncio.ensure_future(answer_soon())
    result = await supervise(session, progress, stall_timeout_s=0.3)
    await answering
    assert result.outcome is Outcome.STALLED
    [answered] = [line for line in lines(sc_folder) if line.kind is ProgressKind.ANSWER]
    assert lines(sc_folder)[-1].at > answered.at


async def test_a_broken_message_source_is_recorded_and_the_work_goes_on(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(TextEvent("working"))

    async def broken() -> AsyncIterator[InboxLine]:
        raise OSError("deliveries.jsonl: input/output error")
        yield  # pragma: no cover - makes this an async generator

    async def finish_later() -> None:
        await asyncio.sleep(0.2)
        session.emit(TurnEndedEvent())

    finishing = asyncio.ensure_future(finish_later())
    result = await supervise(session, progress, broken())
    await finishing
    assert result.outcome is Outcome.DONE
    [error] = [line for line in lines(sc_folder) if line.kind is ProgressKind.ERROR]
    assert "messages can no longer reach the engine" in error.text


async def test_cancelling_the_supervisor_stops_the_session(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    session = FakeSession(TextEvent("working"))
    supervising = asyncio.ensure_future(
        supervise_engine(session, progress, None, asyncio.Event(), 60.0, check_s=0.05)
    )
    async with asyncio.timeout(BOUND_S):
        while ProgressKind.TEXT not in kinds(sc_folder):
            await asyncio.sleep(0.02)
    supervising.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(supervising, BOUND_S)
    assert session.stopped


async def test_a_message_during_the_reviews_starts_a_new_turn_and_the_reviews_run_again(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    """The session stays open while the last turn is reviewed: a message then is a new turn
    of the same session, and the session closes only once every accepted message was taken."""
    session = FakeSession(TurnEndedEvent())
    session.on_send = lambda message: session.emit(
        TextEvent(f"next turn: {message}"), TurnEndedEvent()
    )
    inbox: asyncio.Queue[InboxLine] = asyncio.Queue()
    accepted: list[str] = []
    reviews: list[int] = []
    asked: list[tuple[frozenset[str], bool]] = []

    async def delivered() -> AsyncIterator[InboxLine]:
        while True:
            yield await inbox.get()

    async def review() -> None:
        reviews.append(len(session.sent))
        if len(reviews) == 1:  # the owner writes during the first reviews
            accepted.append("m1")
            inbox.put_nowait(InboxLine(id="m1", kind=InboxKind.MESSAGE, text="one more"))
        elif len(reviews) == 2:  # accepted now, delivered only a moment later
            accepted.append("m2")
            asyncio.get_running_loop().call_later(
                0.2, inbox.put_nowait, InboxLine(id="m2", kind=InboxKind.MESSAGE, text="and this")
            )
        await asyncio.sleep(0.05)

    async def close_inbox(taken: frozenset[str], force: bool) -> bool:
        asked.append((taken, force))
        return force or set(accepted) <= taken

    result = await asyncio.wait_for(
        supervise_engine(
            session,
            progress,
            delivered(),
            asyncio.Event(),
            60.0,
            check_s=0.05,
            on_idle=review,
            close_inbox=close_inbox,
        ),
        30,
    )
    assert session.sent == ["one more", "and this"]
    assert reviews == [0, 1, 2]  # each turn's result reviewed; the last one once more
    assert result == EngineResult(Outcome.DONE, "", "next turn: and this", taken=("m1", "m2"))
    assert asked[-1] == (frozenset({"m1", "m2"}), False)
    assert session.closed


async def test_the_reviews_follow_up_is_made_only_when_sent(
    sc_folder: RunFolder, progress: ProgressWriter
) -> None:
    """The reviews' follow-up (failing checks) starts the next turn of the session; one whose
    reviews a message made stale is never made (a fix round counts only once sent)."""
    session = FakeSession(TurnEndedEvent())
    session.on_send = lambda message: session.emit(TextEvent(f"did: {message}"), TurnEndedEvent())
    inbox: asyncio.Queue[InboxLine] = asyncio.Queue()
    made: list[int] = []
    reviews = 0

    async def delivered() -> AsyncIterator[InboxLine]:
        while True:
            yield await inbox.get()

    async def review() -> Callable[[], str] | None:
        nonlocal reviews
        reviews += 1
        if reviews == 1:  # a message comes while these reviews run: their follow-up is stale
            inbox.put_nowait(InboxLine(id="m1", kind=InboxKind.MESSAGE, text="a message"))
            await asyncio.sleep(0.05)
        if reviews > 2:
            return None

        def follow_up() -> str:
            made.append(reviews)
            return f"fix {reviews}"

        return follow_up

    result = await asyncio.wait_for(
        supervise_engine(
            session, progress, delivered(), asyncio.Event(), 60.0, check_s=0.05, on_idle=review
        ),
        30,
    )
    assert session.sent == ["a message", "fix 2"]
    assert made == [2], "the stale follow-up was made"
    assert result.outcome is Outcome.DONE and result.last_text == "did: fix 2"
