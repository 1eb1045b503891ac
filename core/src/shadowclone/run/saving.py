"""The save and finish phase: the work is pushed (a pull request, a review), the open review
threads answered, the session kept, and the final report written.

Apart from the engine's phases (run/program.py) because it runs in whichever launch has the
network on, from what the earlier phases left: all it needs is passed in (`Finished`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import attrs

from shadowclone.errors import ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Request, Step
from shadowclone.plugin.types import EngineTask, Outcome
from shadowclone.run import threads
from shadowclone.run.access import Caps, ModelAccess
from shadowclone.run.carry import ReviewLine
from shadowclone.run.drive import EngineResult
from shadowclone.run.github import GithubClient, ReviewThread
from shadowclone.run.plan import Plan
from shadowclone.run.progress import ProgressWriter
from shadowclone.run.report import Ending, final_report, message_fates, pr_body, usage_line
from shadowclone.run.review.findings import Finding
from shadowclone.run.save import Saved, save
from shadowclone.run.sessions import Sessions
from shadowclone.run.workspace import Workspace


@attrs.frozen
class Finished:
    """What the earlier phases leave for the save: the target, the work and its reviews."""

    plan: Plan | None
    workspace: Workspace | None
    client: GithubClient | None
    result: EngineResult
    reviews: list[ReviewLine]
    findings: tuple[Finding, ...] = ()
    open_threads: Sequence[ReviewThread] = ()
    """A continued pull request's open review threads, answered after the push."""
    last_session: tuple[EngineTask, str] | None = None
    """The working session's task and id, kept for the next clone."""


class Saving:
    """Saves the work and writes the final line."""

    def __init__(
        self,
        folder: RunFolder,
        request: Request,
        progress: ProgressWriter,
        redact: Callable[[str], str],
        sessions: Sessions,
        access: ModelAccess,
        caps: Caps,
    ) -> None:
        self.folder = folder
        self.request = request
        self.progress = progress
        self.redact = redact
        self.sessions = sessions
        self.access = access
        self.caps = caps
        self.finished = False
        """The final line is written: no later phase needs the engine's corner."""

    async def finish(self, done: Finished) -> int:
        """Save the work and write the final line; returns the exit code."""
        result, saved = await self.save_or_fail(done)
        report = self.report(done.plan, done.workspace, result, done.reviews, saved)
        self.finished = True
        self.progress.final(result.outcome, saved.pr_url if saved else None, report)
        return 0 if result.outcome in (Outcome.DONE, Outcome.STOPPED) else 1

    async def save_or_fail(self, done: Finished) -> tuple[EngineResult, Saved | None]:
        """Save what there is to save: the result, failed if work done could not be saved."""
        result = done.result
        saved: Saved | None = None
        if done.workspace is not None and done.plan is not None:
            try:
                saved = await self.save(done)
            except ShadowcloneError as error:
                self.progress.error(Step.SAVE, f"could not save the work: {error}")
                if result.outcome is Outcome.DONE:
                    result = EngineResult(
                        Outcome.FAILED, f"could not save: {error}", result.last_text
                    )
        return result, saved

    async def save(self, done: Finished) -> Saved:
        plan, workspace, client, result = done.plan, done.workspace, done.client, done.result
        assert plan is not None and workspace is not None and client is not None
        summary = self.redact(self.summary(result, done.reviews))
        saved = await asyncio.to_thread(
            save,
            workspace,
            plan,
            client,
            result.outcome,
            summary,
            self.redact,
            self.request.allow_secrets,
            draft=bool(result.capped),
            findings=done.findings,
        )
        self.progress.note(Step.SAVE, saved.note + (f": {saved.pr_url}" if saved.pr_url else ""))
        open_threads = list(done.open_threads)
        if open_threads and saved.pushed and result.outcome is Outcome.DONE:
            commit = await asyncio.to_thread(workspace.git, "rev-parse", "HEAD")
            replied, failed = await asyncio.to_thread(
                threads.reply_in_threads,
                client,
                plan.repository.full_name,
                plan.number,
                open_threads,
                result.last_text,
                commit.strip(),
                self.redact,
            )
            self.progress.note(
                Step.SAVE, f"replied in {replied} of {len(open_threads)} open review threads"
            )
            for line in failed:
                self.progress.error(Step.SAVE, f"could not reply in {line}")
        if saved.pr_url and done.last_session is not None:
            kept = await asyncio.to_thread(self.sessions.keep, plan, *done.last_session)
            if kept:
                self.progress.note(Step.SAVE, kept)
        return saved

    def summary(self, result: EngineResult, reviews: list[ReviewLine]) -> str:
        """The pull request's body, or the review comment."""
        return pr_body(result, reviews, self.request.engine, self.request.id)

    def report(
        self,
        plan: Plan | None,
        workspace: Workspace | None,
        result: EngineResult,
        reviews: list[ReviewLine],
        saved: Saved | None,
    ) -> str:
        """The final line's report: the target, the outcome, the change and the usage."""
        changes = ""
        if workspace is not None and workspace.base_ref:
            with contextlib.suppress(ShadowcloneError):
                changes = workspace.diff_stat()
        progress, _, _ = self.folder.progress()
        inbox, _, _ = self.folder.inbox()
        return final_report(
            Ending(
                target=plan.describe() if plan else self.request.target.key,
                result=result,
                reviews=reviews,
                saved=saved,
                login_problem=self.access.login_problem(),
                changes=changes,
                usage=usage_line(progress, self.caps.watch.turns, self.caps.watch.minutes()),
                fates=message_fates(inbox, result),
            )
        )
