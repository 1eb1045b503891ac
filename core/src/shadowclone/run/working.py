"""The working session: the engine works on the target, takes the owner's messages, has its
turns reviewed, and goes on after a usage limit's reset.

Apart from the target and workspace steps (run/targeting.py) because it runs in whichever
launch the engine works in, from what those steps found (`Known`) or a handoff carried.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

import attrs

from shadowclone import files
from shadowclone.errors import ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import INBOX_CLOSED, SESSION_ID, InboxKind, Step
from shadowclone.plugin.types import EarlyStart, EngineTask, Outcome
from shadowclone.run.access import Caps, ModelAccess, UsageLimits
from shadowclone.run.carry import KeptSession, ReviewLine
from shadowclone.run.drive import EngineResult, supervise_engine
from shadowclone.run.drive.caps import priced
from shadowclone.run.early import EarlyEngine
from shadowclone.run.inbox import delivered
from shadowclone.run.plan import Mode
from shadowclone.run.progress import ProgressWriter
from shadowclone.run.prompt import RESUME_PROMPT
from shadowclone.run.reviewing import Reviewing
from shadowclone.run.sessions import Given, Sessions
from shadowclone.run.state import Basics, Known
from shadowclone.run.tasks import Tasks


class Parked(Exception):
    """A usage limit ended the working session and resets a long wait away: the clone keeps
    the session and exits, to be launched again at the reset (`Resume.SESSION`)."""

    def __init__(self, session_id: str, state_dir: Path, reset: datetime) -> None:
        super().__init__(session_id)
        self.session_id = session_id
        self.state_dir = state_dir
        self.reset = reset


class Messages:
    """The owner's messages the working session took, and the inbox's closing."""

    def __init__(self, folder: RunFolder, progress: ProgressWriter, stop: asyncio.Event) -> None:
        self.folder = folder
        self.progress = progress
        self.stop = stop
        self.taken: tuple[str, ...] = ()
        """Messages the sessions so far took, this launch's and earlier ones' (a usage limit
        ended them): taken all the same."""
        self.remote_close: Callable[[frozenset[str], bool], Awaitable[bool]] | None = None
        """Where the run folder travels (run/relay.py): serve decides the close, under its
        inbox lock, on its copy of the inbox."""
        self.closed = False

    def take(self, taken: tuple[str, ...]) -> tuple[str, ...]:
        """Add what a session took; returns all taken so far."""
        self.taken = tuple(dict.fromkeys([*self.taken, *taken]))
        return self.taken

    async def close(self, taken: frozenset[str], force: bool) -> bool:
        """Take no more messages, unless one accepted has not reached the engine yet (then
        False, and the engine's session stays open for it); `force` closes regardless.
        Under the inbox lock, which `send` holds to check and append."""
        if self.closed:
            return True
        taken |= frozenset(self.taken)
        if self.remote_close is not None:
            if not await self.remote_close(taken, force or self.stop.is_set()):
                return False
            self.progress.note(Step.SAVE, INBOX_CLOSED)
            self.closed = True
            return True
        with files.lock_for(self.folder.inbox_file):
            inbox, _, _ = self.folder.inbox()
            waiting = [
                line for line in inbox if line.kind is InboxKind.MESSAGE and line.id not in taken
            ]
            if waiting and not force and not self.stop.is_set():
                return False
            self.progress.note(Step.SAVE, INBOX_CLOSED)
            self.closed = True
        return True


class Working:
    """Runs the engine's working session to its end."""

    def __init__(
        self,
        basics: Basics,
        known: Known,
        access: ModelAccess,
        caps: Caps,
        limits: UsageLimits,
        tasks: Tasks,
        early: EarlyEngine,
        sessions: Sessions,
        reviewing: Reviewing,
    ) -> None:
        self.basics = basics
        self.known = known
        self.access = access
        self.caps = caps
        self.limits = limits
        self.tasks = tasks
        self.early = early
        self.sessions = sessions
        self.reviewing = reviewing
        self.messages = Messages(basics.folder, basics.progress, basics.stop)
        self.last_session: tuple[EngineTask, str] | None = None
        """The working session's task and id, once it ended: kept for the next clone."""

    async def work(
        self, prompt: str, kept: KeptSession | None = None
    ) -> tuple[EngineResult, list[ReviewLine]]:
        """The engine's work, a new session or the `kept` one; raises `Parked` for a usage
        limit's long wait, to keep the session for a launch at the reset (the inbox stays
        open)."""
        if kept is not None:
            self.messages.taken = kept.taken
        try:
            result = await self._engine(prompt, kept)
        except ShadowcloneError as error:
            self.basics.progress.error(Step.ENGINE, str(error))
            result = EngineResult(Outcome.FAILED, str(error))
        await self.messages.close(frozenset(result.taken), force=True)
        return result, self.reviewing.lines if result.outcome is Outcome.DONE else []

    def keep(self, parked: Parked) -> KeptSession:
        """What the launch at the reset needs to resume the parked session."""
        watch = self.caps.watch
        return KeptSession(
            session_id=parked.session_id,
            state_dir=parked.state_dir.name,
            taken=self.messages.taken,
            turns=watch.turns,
            minutes=watch.minutes(),
            cost_usd=watch.cost_usd,
            fixes=self.reviewing.fixes,
        )

    async def _open(
        self, prompt: str, web_tools: bool, kept: KeptSession | None
    ) -> tuple[EngineTask, tuple[EngineTask, EarlyStart] | None, Given | None] | EngineResult:
        """The session's first task: the `kept` session's, or a new one (on the engine
        started early, or going on with an earlier clone's session); a result if the owner
        stopped the clone before a kept session resumed."""
        basics, progress = self.basics, self.basics.progress
        if kept is not None:
            self.caps.begin(kept)
            if basics.stop.is_set():
                progress.note(Step.ENGINE, "the owner stopped the clone: it saves its work")
                detail = "the owner stopped the clone"
                return EngineResult(Outcome.STOPPED, detail, taken=self.messages.taken)
            state_dir = basics.engine_area / kept.state_dir
            self.tasks.state_dirs.append(state_dir)
            progress.scheduled(
                f"the usage limit has reset: the engine resumes its session {kept.session_id}",
                None,
            )
            task = await self.tasks.new(prompt, web_tools, kept.session_id, state_dir)
            return task, None, None
        assert self.known.plan is not None
        progress.note(Step.ENGINE, f"starting {basics.request.engine}")
        early = await self.early.take()
        if early is None:
            task = await self.tasks.new(prompt, web_tools)
        else:
            task = attrs.evolve(
                early[0],
                prompt=prompt,
                web_tools=web_tools,
                project_settings=self.known.trusted_head(),
            )
        given = self.sessions.given(self.known.plan)
        if given is not None:
            task = await asyncio.to_thread(self.sessions.restore, task, given)
            progress.note(
                Step.ENGINE,
                f"the engine goes on with the session of clone {given[0].clone_id}, which "
                "worked on this pull request",
            )
        self.caps.begin()
        return task, early, given

    async def _engine(self, prompt: str, kept: KeptSession | None = None) -> EngineResult:
        """Run the engine's working session to its end: a session a usage limit ended is
        resumed at the reset (or the owner's `resume`), as often as that happens; in this
        process for a short wait, else by the next launch (`Parked`), which passes `kept`."""
        assert self.known.plan is not None
        basics, request = self.basics, self.basics.request
        web_tools = self.known.plan.mode is not Mode.REVIEW
        opened = await self._open(prompt, web_tools, kept)
        if isinstance(opened, EngineResult):
            return opened
        task, early, given = opened
        self.access.note()
        self.access.prepare_upstream()
        self.caps.arm()
        while True:
            if early is not None:
                launched = await early[1].launch(task)
                early = None
            else:
                launched = await basics.registry.engine(request.engine).factory().launch(task)
            session = priced(launched, request.price)
            messages = delivered(
                basics.folder, kinds={InboxKind.MESSAGE}, taken=self.messages.taken
            )
            self.limits.working = session
            try:
                async with contextlib.aclosing(messages):
                    result = await supervise_engine(
                        session,
                        basics.progress,
                        messages,
                        basics.stop,
                        request.stall_timeout_s,
                        on_idle=self._reviews_between_turns,
                        close_inbox=self.messages.close,
                        gate=self.caps.gate,
                        # Held at the proxy, or being ended for the usage limit: no stall.
                        held=self.limits.holding,
                    )
            finally:
                self.limits.working = None
            result = attrs.evolve(result, taken=self.messages.take(result.taken))
            if session.session_id and SESSION_ID.fullmatch(session.session_id):
                self.last_session = (task, session.session_id)
            if given is not None and task.resume and self._never_went_on(result):
                basics.progress.note(
                    Step.ENGINE,
                    f"the engine could not go on with clone {given[0].clone_id}'s session "
                    f"({result.detail[:200] or 'it ended'}): it starts afresh",
                )
                given, task = None, await self.tasks.new(prompt, web_tools)
                continue
            reset = await self.limits.take_reset()
            if reset is None or basics.stop.is_set():
                return result
            resumed = await self._after_reset(result, task, session.session_id or "", reset)
            if isinstance(resumed, EngineResult):
                return resumed
            task = resumed

    async def _after_reset(
        self, result: EngineResult, task: EngineTask, resume: str, reset: datetime
    ) -> EngineTask | EngineResult:
        """The task resuming session `resume`, which a usage limit ended, once the limit has
        reset; the result if the session cannot be resumed or the owner stopped the clone
        meanwhile. Raises `Parked` if the reset is a long wait away."""
        if not SESSION_ID.fullmatch(resume):
            # It goes on the engine's command line: nothing the engine printed may be read
            # there as an option.
            return attrs.evolve(
                result,
                outcome=Outcome.FAILED,
                detail="the usage limit ended the engine, which named no session to resume "
                f"(it said {resume[:80]!r})",
            )
        if self.limits.waits_long(reset) and task.state_dir.parent == self.basics.engine_area:
            raise Parked(resume, task.state_dir, reset)
        await self.limits.until_reset(reset, self.limits.scheduled_at)
        self.caps.watch.resume()
        if self.basics.stop.is_set():
            return attrs.evolve(
                result, outcome=Outcome.STOPPED, detail="the owner stopped the clone"
            )
        self.basics.progress.scheduled(
            f"the usage limit has reset: the engine resumes its session {resume}", None
        )
        return await self.tasks.new(RESUME_PROMPT, task.web_tools, resume, task.state_dir)

    def _never_went_on(self, result: EngineResult) -> bool:
        """Whether a resumed session failed before its first turn ended (its files could not
        be read back, say): nothing of it reached the owner."""
        return (
            result.outcome is Outcome.FAILED
            and self.caps.watch.turns == 0
            and not result.last_text
            and not self.basics.stop.is_set()
            and self.limits.resume_at is None
        )

    async def _reviews_between_turns(self) -> Callable[[], str] | None:
        """The reviews of the turn that just ended (`Reviewing.between_turns`)."""
        known = self.known
        assert known.plan is not None and known.workspace is not None
        return await self.reviewing.between_turns(known.plan, known.workspace)
