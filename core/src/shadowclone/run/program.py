"""runClone: the program inside a clone.

It reads the request and the secrets, then goes through the steps, each announced by progress
lines: target, workspace, hooks, engine, review, save, finish. Whatever happens after the
workspace exists (done, stopped, stalled, the engine crashing) the work so far is saved before
the final line is written, and every line passes `redact_secrets` first.

Each phase is an object of its own, given what it needs: the target and workspace steps
(run/targeting.py), the working session (run/working.py), the handoffs between launches
(run/handoff.py) and the save (run/saving.py); what they find is kept in one `Known`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from shadowclone.errors import ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Request, RunMode, Step
from shadowclone.plugin import contract
from shadowclone.plugin.manager import Registry, load_registry
from shadowclone.plugin.types import NetworkMode, Outcome
from shadowclone.proxy.secrets import Secrets
from shadowclone.redact import (
    RedactedDescriptors,
    redact_tokens,
)
from shadowclone.run.access import Caps, ModelAccess, UsageLimits
from shadowclone.run.ask.http import AskService
from shadowclone.run.ask.reads import GithubReads
from shadowclone.run.carry import ReviewLine
from shadowclone.run.credentials import CredentialWatch
from shadowclone.run.drive import EngineResult
from shadowclone.run.early import EarlyEngine
from shadowclone.run.handoff import Handoffs
from shadowclone.run.headstart import HeadStart
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.inbox import set_on_stop
from shadowclone.run.lifecycle import LifecycleCommands
from shadowclone.run.plan import Mode
from shadowclone.run.progress import AskRelay, ProgressWriter
from shadowclone.run.review.findings import FindingsTool
from shadowclone.run.reviewing import Reviewing
from shadowclone.run.saving import Finished, Saving
from shadowclone.run.sessions import Sessions
from shadowclone.run.state import Basics, Known
from shadowclone.run.targeting import Stopped, Targeting
from shadowclone.run.tasks import Tasks
from shadowclone.run.working import Parked, Working
from shadowclone.run.workspace import trust_work_tree

if TYPE_CHECKING:
    from shadowclone.run.relay import RelayLink

CLONE_MARKER = contract.CLONE_ID_VARIABLE
"""Names the processes of this clone (`EngineIdentity.reap`)."""
ENGINE_AREA = contract.ENGINE_AREA
ASK_OUTBOX = "asks.jsonl"


class CloneRun:
    """The clone's phases in order: in a first launch the target, the workspace, the work
    and the save; in a later one the phase the earlier launch handed on (`Handoffs`)."""

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
        relay: RelayLink | None = None,
    ) -> None:
        identity = identity or EngineIdentity()
        watch = CredentialWatch(secrets.redactor, identity)
        progress = ProgressWriter(folder, secrets.redactor, watch=watch.check)
        self.ask_service = AskService(folder, secrets.redactor, request.ask_timeout_s)
        known = self.known = Known()
        self.findings = FindingsTool(
            lambda: known.plan is not None and known.plan.mode is Mode.REVIEW
        )
        self.ask_service.add_tool(self.findings)
        # Served from this process from its start: the engine never waits for it.
        reads = GithubReads(secrets.redactor)
        self.ask_service.add_tool(reads)
        engine_area = folder.path / ENGINE_AREA
        basics = self.basics = Basics(
            folder,
            request,
            secrets,
            registry,
            identity,
            progress,
            asyncio.Event(),
            workspace_path,
            engine_area,
        )
        # What the engine has used of the clone's caps (counted from the engine's start).
        caps = Caps(request, progress, self.ask_service)
        limits = UsageLimits(folder, request, progress, basics.stop, caps)
        self.access = ModelAccess(
            request,
            secrets,
            identity,
            progress,
            limits,
            egress_proxy=egress_proxy,
            login_state=login_state,
            credentials=watch,
        )
        self.asks = AskRelay(engine_area / ASK_OUTBOX, progress)
        self.tasks = Tasks(
            registry,
            request,
            identity,
            self.access,
            self.ask_service,
            (folder.path, workspace_path, engine_area),
            self.asks.outbox,
            known.trusted_head,
        )
        self.early = EarlyEngine(registry, request, self.access, self.tasks.for_early_start)
        """The engine's program, started beside the target and workspace steps where the
        engine can (`StartsEarly`)."""
        reviewing = Reviewing(
            request,
            registry,
            identity,
            progress,
            basics.stop,
            self.access,
            limits,
            self.tasks.for_consultation,
            engine_area / "home",
        )
        sessions = Sessions(folder, request, registry, identity, watch.redact)
        self.saving = Saving(folder, request, progress, basics.redact, sessions, self.access, caps)
        self.targeting = Targeting(basics, known, reads, head_start)
        self.working = Working(
            basics, known, self.access, caps, limits, self.tasks, self.early, sessions, reviewing
        )
        if relay is not None:  # serve decides the inbox's close, on its copy
            self.working.messages.remote_close = relay.close_inbox
        self.handoffs = Handoffs(
            basics,
            known,
            self.targeting,
            self.working,
            reviewing,
            self.findings,
            limits,
            self._finish,
        )

    async def run(self) -> int:
        basics = self.basics
        self._prepare_engine_area()
        await self.tasks.serve_asks()
        self.access.start_early(basics.registry)
        watcher = asyncio.create_task(set_on_stop(basics.folder, basics.stop))
        relay = asyncio.create_task(self.asks.run())
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():  # where signals arrive
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, basics.stop.set)
        kept_dir: Path | None = None  # a kept session's, for the launch that resumes it
        try:
            return await self._steps()
        except Parked as parked:
            kept_dir = parked.state_dir
            self.handoffs.park(parked)
            return 0  # the next launch resumes the session (`Handoffs.go_on`)
        finally:
            await self.early.discard()
            watcher.cancel()
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            basics.identity.reap((CLONE_MARKER, basics.request.id))
            await self.access.close()
            await self.ask_service.close()
            for state_dir in self.tasks.state_dirs:
                if state_dir != kept_dir:
                    basics.identity.remove(state_dir)
            if self.saving.finished:
                # The engine's home, its leftovers and its outbox: nothing it wrote (a secret
                # it printed into a file, its tools' caches) stays in the run folder.
                basics.identity.remove(basics.engine_area)
            if self.known.client is not None:
                self.known.client.close()

    async def _steps(self) -> int:
        handoff = self.handoffs.take()
        if handoff is None:
            await self.early.start()
            return await self._first_launch()
        return await self.handoffs.go_on(handoff)

    def _prepare_engine_area(self) -> None:
        basics = self.basics
        home = basics.engine_area / "home"
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        if basics.identity.isolated:
            trust_work_tree(home / ".gitconfig", basics.workspace_path)
        basics.identity.share(basics.engine_area)

    async def _first_launch(self) -> int:
        """Target, workspace, work and save; or, for a stranger's issue or a review, the
        work handed to a launch with no network but the model's API."""
        progress, known = self.basics.progress, self.known
        result = EngineResult(Outcome.FAILED, "the engine never started")
        reviews: list[ReviewLine] = []
        try:
            await self.targeting.target()
            await self.targeting.workspace()
        except Stopped:
            result = EngineResult(Outcome.STOPPED, "stopped before the engine started")
        except ShadowcloneError as error:
            progress.error(known.step_now(), str(error))
            result = EngineResult(Outcome.FAILED, str(error))
        else:
            assert known.plan is not None and known.workspace is not None
            await self.targeting.take_context()
            if self._quarantined():
                # A stranger's words drive the engine: it works with only the model's API.
                self.handoffs.carry_on()
                progress.note(
                    Step.WORKSPACE,
                    f"the issue was written by {known.plan.stranger}, who cannot push to "
                    f"{known.plan.repository.full_name}: the engine works next with no network "
                    'but the model\'s API ([security] strangers = "model-only")',
                )
                return 0
            if known.plan.stranger is not None:
                progress.note(
                    Step.WORKSPACE,
                    f"the issue was written by {known.plan.stranger}, who cannot push: the engine "
                    'keeps the network ([security] strangers = "open")',
                )
            if known.plan.mode is Mode.REVIEW:
                # Fetched with no engine running; the engine works with the network off.
                self.handoffs.carry_on()
                progress.note(
                    Step.WORKSPACE,
                    "fetched; the review runs next with no network but the model's API",
                )
                return 0
            try:
                told = await LifecycleCommands(self.basics, known).run()
            except Stopped:
                result = EngineResult(Outcome.STOPPED, "stopped before the engine started")
            else:
                result, reviews = await self.working.work(self.targeting.prompt(told))
        return await self._finish(result, reviews)

    def _quarantined(self) -> bool:
        plan = self.known.plan
        assert plan is not None
        return plan.stranger is not None and (
            self.basics.request.strangers_network is NetworkMode.MODEL_ONLY
        )

    async def _finish(self, result: EngineResult, reviews: list[ReviewLine]) -> int:
        """Save the work (`Saving`) and write the final line; returns the exit code."""
        known = self.known
        done = Finished(
            known.plan,
            known.workspace,
            known.client,
            result,
            reviews,
            findings=tuple(self.findings.findings),
            open_threads=tuple(known.open_threads),
            last_session=self.working.last_session,
        )
        return await self.saving.finish(done)


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
    relay: RelayLink | None = None,
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
        atexit.register(RedactedDescriptors(secrets.redactor).close)
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
        relay,
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
    relay: RelayLink | None = None,
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
        relay=relay,
    )
    return await run.run()
