"""The reviews between the engine's turns, and the fix rounds they start.

Apart from the working phase (run/program.py) because the reviews run their own sessions of
the engine (a review stage's consultation) and keep their own count of fix rounds, which a
launch resuming the session carries on (`KeptSession.fixes`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from shadowclone.node.schemas import Request, Step
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import EngineTask, ReviewContext
from shadowclone.run.access import ModelAccess, UsageLimits
from shadowclone.run.carry import ReviewLine
from shadowclone.run.drive import supervise_engine
from shadowclone.run.drive.caps import priced
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.plan import Mode, Plan
from shadowclone.run.progress import ProgressWriter
from shadowclone.run.prompt import FIX_PROMPT
from shadowclone.run.review.runner import run_review_stages
from shadowclone.run.workspace import Workspace

CONSULT_TIMEOUT_S = 20 * 60.0

NewTask = Callable[[str], Awaitable[EngineTask]]
"""Makes the task of a consultation's session from its prompt (no web tools)."""


class Reviewing:
    """The review stages, run on the engine's last turn while its session stays open."""

    def __init__(
        self,
        request: Request,
        registry: Registry,
        identity: EngineIdentity,
        progress: ProgressWriter,
        stop: asyncio.Event,
        access: ModelAccess,
        limits: UsageLimits,
        new_task: NewTask,
        engine_home: Path,
    ) -> None:
        self.request = request
        self.registry = registry
        self.identity = identity
        self.progress = progress
        self.stop = stop
        self.access = access
        self.limits = limits
        self.new_task = new_task
        self.engine_home = engine_home
        self.lines: list[ReviewLine] = []
        """The reviews of the engine's last turn (run between turns, the session open)."""
        self.failed_checks: list[str] = []
        """The output of the last reviews' failing stages that ran the repository's checks."""
        self.fixes = 0
        """Fix rounds used: failing checks sent back to the engine."""

    async def between_turns(self, plan: Plan, workspace: Workspace) -> Callable[[], str] | None:
        """Review the turn's result; failing checks of the repository go back to the engine
        as its next turn, at most `fix_rounds` times. Returned as the follow-up the supervisor
        makes when it sends it (it drops one whose reviews a message made stale): a round
        counts only once it is sent."""
        self.lines = await self.review(plan, workspace)
        if not self.failed_checks or self.fixes >= self.request.fix_rounds or self.stop.is_set():
            return None
        details = "\n\n".join(self.failed_checks)

        def follow_up() -> str:
            self.fixes += 1
            self.progress.note(
                Step.REVIEW,
                f"the checks failed: they go back to the engine (fix round {self.fixes} of "
                f"{self.request.fix_rounds})",
            )
            return FIX_PROMPT.format(details=details)

        return follow_up

    async def consult(self, prompt: str) -> str:
        """A review stage's question to the engine, in a session of its own."""
        task = await self.new_task(prompt)
        self.access.note()
        session = priced(
            await self.registry.engine(self.request.engine).factory().launch(task),
            self.request.price,
        )
        self.limits.consulting += 1
        try:
            result = await supervise_engine(
                session,
                self.progress,
                None,
                self.stop,
                self.request.stall_timeout_s,
                held=lambda: self.limits.held > 0,
            )
        finally:
            self.limits.consulting -= 1
        return result.last_text

    async def review(self, plan: Plan, workspace: Workspace) -> list[ReviewLine]:
        """Run the review stages on the workspace's change; keeps the failing checks."""
        loop = asyncio.get_running_loop()

        def consult(prompt: str) -> str:
            future = asyncio.run_coroutine_threadsafe(self.consult(prompt), loop)
            return future.result(timeout=CONSULT_TIMEOUT_S)

        context = ReviewContext(
            workspace=workspace.path,
            base_ref=workspace.base_ref,
            owner_wrote=plan.owner_wrote,
            check_commands=self.request.check_commands,
            consult=consult,
            run_as=self.identity.argv_prefix(),
            env=self.identity.environment(os.environ, self.engine_home),
        )
        if plan.mode is not Mode.REVIEW:
            # Reviews read the change as commits: commit what the engine left first, as the
            # engine, in its own repository.
            await asyncio.to_thread(
                workspace.commit_engine_work, f"shadowclone: work on #{plan.number}"
            )
        reviewed = await run_review_stages(
            self.registry.review_stages(), context, self.progress, self.stop
        )
        self.failed_checks = reviewed.failed_checks
        return reviewed.lines
