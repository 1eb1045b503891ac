"""runClone: the program inside a clone.

It reads the request and the secrets, then goes through the steps, each announced by progress
lines: target, workspace, hooks, engine, review, save, finish. Whatever happens after the
workspace exists (done, stopped, stalled, the engine crashing) the work so far is saved before
the final line is written, and every line passes `redact_secrets` first.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import shutil
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import attrs

from shadowclone import files
from shadowclone.errors import ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    INBOX_CLOSED,
    SESSION_ID,
    Handoff,
    InboxKind,
    Request,
    Resume,
    RunMode,
    Step,
)
from shadowclone.plugin import contract
from shadowclone.plugin.manager import Registry, load_registry
from shadowclone.plugin.types import (
    EarlyStart,
    EngineTask,
    NetworkMode,
    Outcome,
)
from shadowclone.proxy.secrets import Secrets
from shadowclone.redact import (
    RedactedDescriptors,
    Redactor,
    redact_tokens,
)
from shadowclone.run import threads
from shadowclone.run.access import Caps, ModelAccess, UsageLimits
from shadowclone.run.ask.http import AskService
from shadowclone.run.ask.reads import GithubReads
from shadowclone.run.carry import Carry, KeptSession, ReviewLine, read_carry, write_carry
from shadowclone.run.cloning import clone_url_for
from shadowclone.run.context import Context, Trust, gather
from shadowclone.run.drive import EngineResult, supervise_engine
from shadowclone.run.drive.caps import priced
from shadowclone.run.early import EarlyEngine
from shadowclone.run.engine_settings import take_from_base
from shadowclone.run.github import GithubClient, ReviewThread
from shadowclone.run.headstart import PRIVATE_AREA, HeadStart
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.inbox import delivered, set_on_stop
from shadowclone.run.plan import Mode, Plan, resolve
from shadowclone.run.progress import AskRelay, ProgressWriter
from shadowclone.run.prompt import RESUME_PROMPT, build_prompt
from shadowclone.run.review.findings import FindingsTool
from shadowclone.run.reviewing import Reviewing
from shadowclone.run.saving import Finished, Saving
from shadowclone.run.sessions import Sessions
from shadowclone.run.tasks import Tasks
from shadowclone.run.workspace import Workspace, clone, prepare, trust_work_tree

log = logging.getLogger(__name__)

CLONE_MARKER = contract.CLONE_ID_VARIABLE
"""Names the processes of this clone (`EngineIdentity.reap`)."""
ENGINE_AREA = "engine"
ASK_OUTBOX = "asks.jsonl"
READS_SAID = (
    "To read more of this repository on GitHub (other issues and pull requests, comments, "
    "files at any ref, checks and job logs), use the `github` tool of the shadowclone_ask "
    "server; it only reads."
)
CONTEXT_AREA = "context"
"""Where the engine's corner keeps the images pasted into the conversation."""


class Stopped(Exception):
    """The owner stopped the clone before its engine started."""


class Parked(Exception):
    """A usage limit ended the working session and resets a long wait away: the clone keeps
    the session and exits, to be launched again at the reset (`Resume.SESSION`)."""

    def __init__(self, session_id: str, state_dir: Path, reset: datetime) -> None:
        super().__init__(session_id)
        self.session_id = session_id
        self.state_dir = state_dir
        self.reset = reset


class CloneRun:
    def __init__(
        self,
        folder: RunFolder,
        request: Request,
        secrets: Secrets,
        workspace_path: Path,
        registry: Registry,
        identity: EngineIdentity | None = None,
        *,
        egress_proxy: str | None = None,
        login_state: Path | None = None,
        head_start: HeadStart | None = None,
    ) -> None:
        self.folder = folder
        self.head_start = head_start
        """The clone, the reads and the workspace the entry point began (run/headstart.py),
        for the target and workspace steps to take."""
        self.request = request
        self.secrets = secrets
        self.workspace_path = workspace_path
        self.registry = registry
        self.identity = identity or EngineIdentity()
        self.progress = ProgressWriter(folder, Redactor(secrets.all_values()))
        self.ask_service = AskService(folder, Redactor(secrets.all_values()), request.ask_timeout_s)
        self.findings = FindingsTool(
            lambda: self.plan is not None and self.plan.mode is Mode.REVIEW
        )
        self.ask_service.add_tool(self.findings)
        self.reads = GithubReads(Redactor(secrets.all_values()))
        self.ask_service.add_tool(self.reads)
        """Served from this process from its start: the engine never waits for it."""
        self._cloning: asyncio.Future[None] | None = None
        """The repository's clone, begun as soon as the target names it."""
        self.stop = asyncio.Event()
        self.caps = Caps(request, self.progress, self.ask_service)
        """What the engine has used of the clone's caps (counted from the engine's start)."""
        self.limits = UsageLimits(folder, request, self.progress, self.stop, self.caps)
        self.access = ModelAccess(
            request,
            secrets,
            self.identity,
            self.progress,
            self.limits,
            egress_proxy=egress_proxy,
            login_state=login_state,
        )
        self.early = EarlyEngine(registry, request, self.access, self._early_task)
        """The engine's program, started beside the target and workspace steps where the
        engine can (`StartsEarly`)."""
        self.engine_area = folder.path / ENGINE_AREA
        """The engine's corner of the run folder: its home, state folders and the ask
        server's lines; nothing the run program trusts is kept there."""
        self.asks = AskRelay(self.engine_area / ASK_OUTBOX, self.progress)
        self.tasks = Tasks(
            registry,
            request,
            self.identity,
            self.access,
            self.ask_service,
            (folder.path, workspace_path, self.engine_area),
            self.asks.outbox,
            self._trusted_head,
        )
        self.reviewing = Reviewing(
            request,
            registry,
            self.identity,
            self.progress,
            self.stop,
            self.access,
            self.limits,
            self._consultation_task,
            self.engine_area / "home",
        )
        self._taken_earlier: tuple[str, ...] = ()
        """Messages earlier sessions took (a usage limit ended them): taken all the same."""
        self._inbox_closed = False
        self.plan: Plan | None = None
        self.conversation = ""
        """The issue's or pull request's conversation, as the engine reads it."""
        self._gathering: asyncio.Future[Context] | None = None
        self.open_threads: list[ReviewThread] = []
        """A continued pull request's open review threads, answered after the push."""
        self.workspace: Workspace | None = None
        self.client: GithubClient | None = None
        self.sessions = Sessions(
            folder, request, self.registry, self.identity, Redactor(secrets.all_values())
        )
        self.saving = Saving(
            folder,
            request,
            self.progress,
            self.progress_redact,
            self.sessions,
            self.access,
            self.caps,
        )
        self._last_session: tuple[EngineTask, str] | None = None
        """The working session's task and id, once it ended: kept for the next clone."""
        self._finished = False
        """The final line is written: no later phase needs the engine's corner."""
        self.network = NetworkMode.OPEN
        """The network this launch was given (its handoff's)."""
        self._kept_dir: Path | None = None
        """The state folder of a session kept for the launch that resumes it."""

    async def run(self) -> int:
        self._prepare_engine_area()
        await self.tasks.serve_asks()
        self.access.start_early(self.registry)
        watcher = asyncio.create_task(set_on_stop(self.folder, self.stop))
        relay = asyncio.create_task(self.asks.run())
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():  # where signals arrive
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, self.stop.set)
        try:
            return await self._steps()
        except Parked:
            return 0  # the next launch resumes the session (`_resume_session`)
        finally:
            await self.early.discard()
            watcher.cancel()
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            self.identity.reap((CLONE_MARKER, self.request.id))
            await self.access.close()
            await self.ask_service.close()
            for state_dir in self.tasks.state_dirs:
                if state_dir != self._kept_dir:
                    self.identity.remove(state_dir)
            if self._finished:
                # The engine's home, its leftovers and its outbox: nothing it wrote (a secret
                # it printed into a file, its tools' caches) stays in the run folder.
                self.identity.remove(self.engine_area)
            if self.client is not None:
                self.client.close()

    async def _steps(self) -> int:
        handoff = self._take_handoff()
        if handoff is None:
            await self.early.start()
            return await self._first_phase()
        carry = read_carry(self.folder)
        self.plan = carry.plan
        self.conversation = carry.conversation
        self.workspace = self._workspace_for(carry.base_ref)
        if handoff.resume is Resume.SESSION:
            return await self._resume_session(handoff, carry)
        if handoff.resume is Resume.ENGINE:
            self.network = NetworkMode.MODEL_ONLY
            self.progress.note(Step.ENGINE, "launched again with no network but the model's API")
            result, reviews = await self._work()
            return self._save_next(carry, result, reviews)
        self.progress.note(Step.SAVE, "launched again with the network on, to save the work")
        self.client = GithubClient(
            self.secrets.github_token,
            api_url=self.request.github_api_url,
            waited=self._github_waited,
        )
        result = carry.result or EngineResult(Outcome.FAILED, "the review phase left no result")
        self.findings.findings = list(carry.findings)
        return await self._finish(result, list(carry.reviews))

    def _save_next(self, carry: Carry, result: EngineResult, reviews: list[ReviewLine]) -> int:
        """Hand the engine's work to a launch with the network on, which saves it."""
        findings = tuple(self.findings.findings)
        write_carry(
            self.folder,
            attrs.evolve(
                carry, result=result, reviews=tuple(reviews), findings=findings, session=None
            ),
            self.progress_redact,
        )
        self.folder.write_handoff(Handoff(NetworkMode.OPEN, Resume.SAVE))
        self.progress.note(Step.REVIEW, "the work is done; it is saved with the network on")
        return 0

    async def _resume_session(self, handoff: Handoff, carry: Carry) -> int:
        """Launched again for the working session a long usage limit ended: at the reset, or
        at once for the owner's resume or stop (then it only saves the work)."""
        kept = carry.session
        if kept is None:
            result = EngineResult(Outcome.FAILED, "launched to resume a session it was not given")
            self.progress.error(Step.ENGINE, result.detail)
            return await self._finish(result, [])
        self.network = handoff.network
        self._taken_earlier = kept.taken
        self.reviewing.fixes = kept.fixes
        self.reviewing.lines = list(carry.reviews)
        self.findings.findings = list(carry.findings)
        self.open_threads = list(carry.open_threads)
        if self.folder.stop_marker() is not None:
            self.stop.set()  # before the watcher says so: a stop never starts the engine
        self.progress.note(
            Step.ENGINE, "launched again to resume the engine's session, which a usage limit ended"
        )
        if self.network is NetworkMode.OPEN:
            assert self.plan is not None
            self.client = GithubClient(
                self.secrets.github_token,
                api_url=self.request.github_api_url,
                waited=self._github_waited,
            )
            self._trust = Trust(self.client, self.plan)
            self.reads.open(self.plan, self.client, self._trust)
        if handoff.not_before is not None and not self.stop.is_set():
            # Launched before the reset with no word from the owner: wait here.
            await self.limits.until_reset(handoff.not_before, handoff.at)
        result, reviews = await self._work(kept)
        if self.network is not NetworkMode.OPEN:
            return self._save_next(carry, result, reviews)
        return await self._finish(result, reviews)

    def _park(self, parked: Parked) -> None:
        """Keep the working session for the launch that resumes it at the reset: what that
        launch needs goes to `carry.json`, then `handoff.json` names the reset."""
        assert self.plan is not None and self.workspace is not None
        self._kept_dir = parked.state_dir
        kept = KeptSession(
            session_id=parked.session_id,
            state_dir=parked.state_dir.name,
            taken=self._taken_earlier,
            turns=self.caps.watch.turns,
            minutes=self.caps.watch.minutes(),
            cost_usd=self.caps.watch.cost_usd,
            fixes=self.reviewing.fixes,
        )
        carry = Carry(
            self.plan,
            self.workspace.base_ref,
            reviews=tuple(self.reviewing.lines),
            findings=tuple(self.findings.findings),
            conversation=self.conversation,
            session=kept,
            open_threads=tuple(self.open_threads),
        )
        write_carry(self.folder, carry, self.progress_redact)
        handoff = Handoff(self.network, Resume.SESSION, self.limits.scheduled_at, parked.reset)
        self.folder.write_handoff(handoff)
        log.info("the clone exits; it is launched again at %s", parked.reset.isoformat())

    def _prepare_engine_area(self) -> None:
        home = self.engine_area / "home"
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        if self.identity.isolated:
            trust_work_tree(home / ".gitconfig", self.workspace_path)
        self.identity.share(self.engine_area)

    def _workspace_for(self, base_ref: str) -> Workspace:
        return Workspace(
            self.workspace_path,
            self.secrets.github_token,
            base_ref,
            self.folder.path / PRIVATE_AREA,
            self.identity,
        )

    def _take_handoff(self) -> Handoff | None:
        """The phase this launch is for, if an earlier launch handed its work on."""
        handoff = self.folder.handoff()
        if handoff is not None:
            self.folder.handoff_file.unlink()
        return handoff

    async def _first_phase(self) -> int:
        result = EngineResult(Outcome.FAILED, "the engine never started")
        reviews: list[ReviewLine] = []
        try:
            await self._target()
            await self._workspace()
        except Stopped:
            result = EngineResult(Outcome.STOPPED, "stopped before the engine started")
        except ShadowcloneError as error:
            self.progress.error(self._step_now(), str(error))
            result = EngineResult(Outcome.FAILED, str(error))
        else:
            assert self.plan is not None and self.workspace is not None
            await self._take_context()
            if self._quarantined():
                # A stranger's words drive the engine: it works with only the model's API.
                self._carry_on()
                self.progress.note(
                    Step.WORKSPACE,
                    f"the issue was written by {self.plan.stranger}, who cannot push to "
                    f"{self.plan.repository.full_name}: the engine works next with no network "
                    'but the model\'s API ([security] strangers = "model-only")',
                )
                return 0
            if self.plan.stranger is not None:
                self.progress.note(
                    Step.WORKSPACE,
                    f"the issue was written by {self.plan.stranger}, who cannot push: the engine "
                    'keeps the network ([security] strangers = "open")',
                )
            if self.plan.mode is Mode.REVIEW:
                # Fetched with no engine running; the engine works with the network off.
                self._carry_on()
                self.progress.note(
                    Step.WORKSPACE,
                    "fetched; the review runs next with no network but the model's API",
                )
                return 0
            result, reviews = await self._work()
        return await self._finish(result, reviews)

    def _carry_on(self) -> None:
        """Hand the work to a launch with no network but the model's API."""
        assert self.plan is not None and self.workspace is not None
        carry = Carry(self.plan, self.workspace.base_ref, conversation=self.conversation)
        write_carry(self.folder, carry, self.progress_redact)
        self.folder.write_handoff(Handoff(NetworkMode.MODEL_ONLY, Resume.ENGINE))

    def _gather_context(self) -> None:
        """Read the conversation beside the clone of the repository."""
        assert self.plan is not None and self.client is not None
        self._gathering = asyncio.ensure_future(
            asyncio.to_thread(
                gather,
                self.client,
                self.plan,
                self.request.requested_at,
                omit_strangers=self.request.omit_strangers_text,
                images=self.engine_area / CONTEXT_AREA,
                trust=self._trust,
            )
        )

    async def _take_context(self) -> None:
        if self._gathering is None:
            return
        context = await self._gathering
        self._gathering = None
        self.conversation = context.prompt()
        self.open_threads = context.open_threads
        self.progress.note(Step.TARGET, context.summary())

    async def _work(self, kept: KeptSession | None = None) -> tuple[EngineResult, list[ReviewLine]]:
        """The engine's work, a new session or the `kept` one; raises `Parked` once the
        session is kept for a launch at a usage limit's reset (the inbox stays open)."""
        try:
            if kept is None:
                result = await self._engine(self.request_prompt())
            else:
                result = await self._engine(RESUME_PROMPT, kept)
        except Parked as parked:
            self._park(parked)
            raise
        except ShadowcloneError as error:
            self.progress.error(Step.ENGINE, str(error))
            result = EngineResult(Outcome.FAILED, str(error))
        self.close_inbox(frozenset(result.taken), force=True)
        return result, self.reviewing.lines if result.outcome is Outcome.DONE else []

    def close_inbox(self, taken: frozenset[str], force: bool) -> bool:
        """Take no more messages, unless one accepted has not reached the engine yet (then
        False, and the engine's session stays open for it); `force` closes regardless.
        Under the inbox lock, which `send` holds to check and append."""
        if self._inbox_closed:
            return True
        taken |= frozenset(self._taken_earlier)
        with files.lock_for(self.folder.inbox_file):
            inbox, _, _ = self.folder.inbox()
            waiting = [
                line for line in inbox if line.kind is InboxKind.MESSAGE and line.id not in taken
            ]
            if waiting and not force and not self.stop.is_set():
                return False
            self.progress.note(Step.SAVE, INBOX_CLOSED)
            self._inbox_closed = True
        return True

    async def _reviews_between_turns(self) -> Callable[[], str] | None:
        """The reviews of the turn that just ended (`Reviewing.between_turns`)."""
        assert self.plan is not None and self.workspace is not None
        return await self.reviewing.between_turns(self.plan, self.workspace)

    async def _consultation_task(self, prompt: str) -> EngineTask:
        """A review's consultation: a session of its own, without web tools."""
        return await self.tasks.new(prompt, web_tools=False)

    async def _finish(self, result: EngineResult, reviews: list[ReviewLine]) -> int:
        """Save the work (`Saving`) and write the final line; returns the exit code."""
        done = Finished(
            self.plan,
            self.workspace,
            self.client,
            result,
            reviews,
            findings=tuple(self.findings.findings),
            open_threads=tuple(self.open_threads),
            last_session=self._last_session,
        )
        result, saved = await self.saving.save_or_fail(done)
        report = self.saving.report(self.plan, self.workspace, result, reviews, saved)
        self._finished = True
        self.progress.final(result.outcome, saved.pr_url if saved else None, report)
        return 0 if result.outcome in (Outcome.DONE, Outcome.STOPPED) else 1

    def _trusted_head(self) -> bool:
        """Whether the checked-out head is the owner's (an issue's new branch, the owner's own
        pull request), so that the engine may load the repository's own settings: never for
        a review, whose head someone else wrote, nor before the target is known."""
        return self.plan is not None and self.plan.owner_wrote

    def _quarantined(self) -> bool:
        assert self.plan is not None
        return self.plan.stranger is not None and (
            self.request.strangers_network is NetworkMode.MODEL_ONLY
        )

    def _step_now(self) -> Step:
        if self.plan is None:
            return Step.TARGET
        if self.workspace is None:
            return Step.WORKSPACE
        return Step.ENGINE

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise Stopped

    async def _target(self) -> None:
        target = self.request.target
        self.progress.note(Step.TARGET, self.identity.describe())
        self.progress.note(Step.TARGET, f"resolving {target.key} on {self.request.github_api_url}")
        # The clone needs only the repository's address, which its name gives on nearly every
        # host: it starts at once, while the client is made and the target is read, and is
        # made again from the address GitHub gives if that is another (a renamed repository).
        guess = clone_url_for(self.request.github_url, target.repo_full_name)
        token, api_url = self.secrets.github_token, self.request.github_api_url
        head = self.head_start
        places = (self.workspace_path, self.folder.path / PRIVATE_AREA)
        if head is not None and not head.matches(
            target, api_url, token, guess, places, self.identity
        ):
            log.warning("the head start read another request: the target step starts over")
            self.head_start = None
            await asyncio.to_thread(head.close)
            for made in (head.workspace, head.private):  # what its clone and thread left
                await asyncio.to_thread(shutil.rmtree, made, True)
            head = None
        if head is not None:
            if head.guess is not None:
                self._cloning = asyncio.wrap_future(head.cloned)
        elif guess is not None:
            self._cloning = self._clone(guess)
        try:
            if head is not None:  # the entry point began the reads (run/headstart.py)
                try:
                    self.plan = await asyncio.wrap_future(head.plan)
                finally:
                    self.client = head.take_client()
                    if self.client is not None:
                        self.client.wire.waited = self._github_waited
            else:
                # Made in a thread (its TLS context takes a while): the engine's early start
                # and the clone go on meanwhile.
                self.client = await asyncio.to_thread(
                    GithubClient, token, api_url=api_url, waited=self._github_waited
                )
                self.plan = await asyncio.to_thread(resolve, self.client, target)
            url = self.plan.repository.clone_url
            if url != guess:
                guessed = self._cloning
                if guessed is not None:
                    await asyncio.gather(guessed, return_exceptions=True)
                    log.info("cloning again from %s: not at %s", url, guess)
                self._cloning = self._clone(url, again=guessed is not None)
        except BaseException:
            if self._cloning is not None:
                await asyncio.gather(self._cloning, return_exceptions=True)  # a thread runs on
            raise
        self.progress.note(Step.TARGET, self.plan.describe())
        assert self.client is not None
        self._trust = Trust(self.client, self.plan)
        """Who may give the clone its task, asked of GitHub once per author."""
        self.reads.open(self.plan, self.client, self._trust)
        self._gather_context()
        self._check_stop()

    def _github_waited(self, seconds: float, why: str) -> None:
        """Told from the client's thread: progress lines are whole appends under a lock."""
        self.progress.note(self._step_now(), f"GitHub's {why}: waiting {seconds:.0f} s, as it asks")

    def _clone(self, url: str, *, again: bool = False) -> asyncio.Future[None]:
        token, identity = self.secrets.github_token, self.identity
        return asyncio.ensure_future(
            asyncio.to_thread(clone, self.workspace_path, url, token, identity, again=again)
        )

    async def _workspace(self) -> None:
        assert self.plan is not None
        plan = self.plan
        assert self._cloning is not None  # begun by the target step
        await self._cloning
        head = self.head_start
        prepared = None if head is None else await asyncio.wrap_future(head.prepared)
        if prepared is not None:
            self.workspace = prepared  # by the entry point's thread (run/headstart.py)
        else:
            self.workspace = await asyncio.to_thread(
                prepare,
                self.workspace_path,
                plan,
                self.secrets.github_token,
                self.folder.path / PRIVATE_AREA,
                self.identity,
            )
        user = plan.user.name or plan.user.login
        self.progress.note(
            Step.WORKSPACE,
            f"cloned {plan.repository.full_name} into {self.workspace_path} as {user}; "
            f"base {self.workspace.base_ref[:12]}",
        )
        if not self._trusted_head():
            # Before any engine starts here: no file of the head's makes anything run.
            workspace = self.workspace
            taken = await asyncio.to_thread(take_from_base, workspace, self.identity)
            self.progress.note(Step.WORKSPACE, taken.describe(workspace.base_ref))
        allowed = f"only {plan.branch}" if plan.branch else "nothing (review only)"
        self.progress.note(
            Step.HOOKS,
            f"pre-push hook installed: {allowed} may be pushed, never "
            f"{plan.repository.default_branch}",
        )
        self._check_stop()

    def request_prompt(self) -> str:
        assert self.plan is not None
        said: tuple[str, ...] = (READS_SAID,) if self.reads.enabled else ()
        if self.open_threads and self.plan.mode is Mode.CONTINUE:
            said += (threads.ASK,)
        return build_prompt(self.plan, self.request.instructions, self.conversation, said)

    async def _early_task(self) -> EngineTask:
        """The task an early engine starts for: no prompt yet, the web tools on."""
        return await self.tasks.new("", web_tools=True)

    async def _engine(self, prompt: str, kept: KeptSession | None = None) -> EngineResult:
        """Run the engine's working session to its end: a session a usage limit ended is
        resumed at the reset (or the owner's `resume`), as often as that happens; in this
        process for a short wait, else by the next launch (`Parked`), which passes `kept`."""
        assert self.plan is not None
        web_tools = self.plan.mode is not Mode.REVIEW
        early: tuple[EngineTask, EarlyStart] | None = None
        given = None
        if kept is not None:
            self.caps.begin(kept)
            if self.stop.is_set():
                self.progress.note(Step.ENGINE, "the owner stopped the clone: it saves its work")
                detail = "the owner stopped the clone"
                return EngineResult(Outcome.STOPPED, detail, taken=self._taken_earlier)
            state_dir = self.engine_area / kept.state_dir
            self.tasks.state_dirs.append(state_dir)
            self.progress.scheduled(
                f"the usage limit has reset: the engine resumes its session {kept.session_id}",
                None,
            )
            task = await self.tasks.new(prompt, web_tools, kept.session_id, state_dir)
        else:
            self.progress.note(Step.ENGINE, f"starting {self.request.engine}")
            early = await self.early.take()
            if early is None:
                task = await self.tasks.new(prompt, web_tools)
            else:
                task = attrs.evolve(
                    early[0],
                    prompt=prompt,
                    web_tools=web_tools,
                    project_settings=self._trusted_head(),
                )
            given = self.sessions.given(self.plan)
            if given is not None:
                task = await asyncio.to_thread(self.sessions.restore, task, given)
                self.progress.note(
                    Step.ENGINE,
                    f"the engine goes on with the session of clone {given[0].clone_id}, which "
                    "worked on this pull request",
                )
            self.caps.begin()
        self.access.note()
        self.access.prepare_upstream()
        self.caps.arm()
        while True:
            if early is not None:
                launched = await early[1].launch(task)
                early = None
            else:
                launched = await self.registry.engine(self.request.engine).factory().launch(task)
            session = priced(launched, self.request.price)
            messages = delivered(self.folder, kinds={InboxKind.MESSAGE}, taken=self._taken_earlier)
            self.limits.working = session
            try:
                async with contextlib.aclosing(messages):
                    result = await supervise_engine(
                        session,
                        self.progress,
                        messages,
                        self.stop,
                        self.request.stall_timeout_s,
                        on_idle=self._reviews_between_turns,
                        close_inbox=self.close_inbox,
                        gate=self.caps.gate,
                        # Held at the proxy, or being ended for the usage limit: no stall.
                        held=self.limits.holding,
                    )
            finally:
                self.limits.working = None
            self._taken_earlier = tuple(dict.fromkeys([*self._taken_earlier, *result.taken]))
            result = attrs.evolve(result, taken=self._taken_earlier)
            if session.session_id and SESSION_ID.fullmatch(session.session_id):
                self._last_session = (task, session.session_id)
            if given is not None and task.resume and self._never_went_on(result):
                self.progress.note(
                    Step.ENGINE,
                    f"the engine could not go on with clone {given[0].clone_id}'s session "
                    f"({result.detail[:200] or 'it ended'}): it starts afresh",
                )
                given, task = None, await self.tasks.new(prompt, web_tools)
                continue
            reset = await self.limits.take_reset()
            if reset is None or self.stop.is_set():
                return result
            resume = session.session_id or ""
            if not SESSION_ID.fullmatch(resume):
                # It goes on the engine's command line: nothing the engine printed may be read
                # there as an option.
                return attrs.evolve(
                    result,
                    outcome=Outcome.FAILED,
                    detail="the usage limit ended the engine, which named no session to resume "
                    f"(it said {resume[:80]!r})",
                )
            if self.limits.waits_long(reset) and task.state_dir.parent == self.engine_area:
                raise Parked(resume, task.state_dir, reset)
            await self.limits.until_reset(reset, self.limits.scheduled_at)
            self.caps.watch.resume()
            if self.stop.is_set():
                return attrs.evolve(
                    result, outcome=Outcome.STOPPED, detail="the owner stopped the clone"
                )
            self.progress.scheduled(
                f"the usage limit has reset: the engine resumes its session {resume}", None
            )
            task = await self.tasks.new(RESUME_PROMPT, task.web_tools, resume, task.state_dir)

    def _never_went_on(self, result: EngineResult) -> bool:
        """Whether a resumed session failed before its first turn ended (its files could not
        be read back, say): nothing of it reached the owner."""
        return (
            result.outcome is Outcome.FAILED
            and self.caps.watch.turns == 0
            and not result.last_text
            and not self.stop.is_set()
            and self.limits.resume_at is None
        )

    def progress_redact(self, text: str) -> str:
        return Redactor(self.secrets.all_values())(text)


async def run_clone(
    folder: RunFolder,
    secrets_file: Path,
    workspace_path: Path | None = None,
    registry: Registry | None = None,
    identity: EngineIdentity | None = None,
    *,
    egress_proxy: str | None = None,
    login_state: Path | None = None,
    own_output_redacted: bool = False,
    head_start: HeadStart | None = None,
) -> int:
    """Run the clone of `folder` to its end; returns the exit code. `own_output_redacted`:
    this process's output is redacted from the moment the secrets are read (the program's
    entry point; tests running it in their own process keep theirs)."""
    request = folder.request()
    try:
        secrets = Secrets.read(secrets_file)
    except ShadowcloneError as error:
        # No secrets to mask yet: the error names only the file and the key.
        ProgressWriter(folder, redact_tokens).final(Outcome.FAILED, None, str(error))
        return 1
    if own_output_redacted:
        # What a launcher keeps of a failed clone: this process's output and its children's,
        # to the last line it prints on its way out.
        atexit.register(RedactedDescriptors(Redactor(secrets.all_values())).close)
    return await _run_clone(
        folder,
        request,
        secrets,
        workspace_path,
        registry,
        identity,
        egress_proxy,
        login_state,
        head_start,
    )


async def _run_clone(
    folder: RunFolder,
    request: Request,
    secrets: Secrets,
    workspace_path: Path | None,
    registry: Registry | None,
    identity: EngineIdentity | None,
    egress_proxy: str | None,
    login_state: Path | None,
    head_start: HeadStart | None = None,
) -> int:
    if request.mode is RunMode.CHECK:
        from shadowclone.run.check import run_check

        return await asyncio.to_thread(
            run_check, folder, request, secrets, registry or load_registry()
        )
    run = CloneRun(
        folder,
        request,
        secrets,
        workspace_path or folder.path / "workspace",
        registry or load_registry(),
        identity,
        egress_proxy=egress_proxy,
        login_state=login_state,
        head_start=head_start,
    )
    return await run.run()
