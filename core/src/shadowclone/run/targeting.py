"""The target and workspace steps: the issue or pull request is read, the repository cloned
and prepared, and the conversation gathered beside them.

Apart from the working phase (run/working.py) because these steps run only in a launch with
the network on, and begin the clone and the reads at once, before anything else is known.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil

from shadowclone.node.schemas import Step
from shadowclone.run import threads
from shadowclone.run.ask.reads import GithubReads
from shadowclone.run.cloning import clone_url_for, repo_cache
from shadowclone.run.context import Context, Trust, gather
from shadowclone.run.engine_settings import take_from_base
from shadowclone.run.github import GithubClient
from shadowclone.run.headstart import PRIVATE_AREA, HeadStart
from shadowclone.run.plan import Mode, resolve
from shadowclone.run.prompt import build_prompt
from shadowclone.run.state import Basics, Known
from shadowclone.run.workspace import clone, prepare

log = logging.getLogger("shadowclone.run.program")
"""The run program's own log, under one name."""

READS_SAID = (
    "To read more of this repository on GitHub (other issues and pull requests, comments, "
    "files at any ref, checks and job logs), use the `github` tool of the shadowclone_ask "
    "server; it only reads."
)
CONTEXT_AREA = "context"
"""Where the engine's corner keeps the images pasted into the conversation."""


class Stopped(Exception):
    """The owner stopped the clone before its engine started."""


class Targeting:
    """Finds the target and prepares its workspace, filling in `known`."""

    def __init__(
        self, basics: Basics, known: Known, reads: GithubReads, head_start: HeadStart | None
    ) -> None:
        self.basics = basics
        self.known = known
        self.reads = reads
        self.head_start = head_start
        """The clone, the reads and the workspace the entry point began (run/headstart.py),
        for the target and workspace steps to take."""
        self._cloning: asyncio.Future[None] | None = None
        """The repository's clone, begun as soon as the target names it."""
        self._gathering: asyncio.Future[Context] | None = None

    async def target(self) -> None:
        basics = self.basics
        request, progress = basics.request, basics.progress
        target = request.target
        progress.note(Step.TARGET, basics.identity.describe())
        progress.note(Step.TARGET, f"resolving {target.key} on {request.github_api_url}")
        # The clone needs only the repository's address, which its name gives on nearly every
        # host: it starts at once, while the client is made and the target is read, and is
        # made again from the address GitHub gives if that is another (a renamed repository).
        guess = clone_url_for(request.github_url, target.repo_full_name)
        token, api_url = basics.secrets.github_token, request.github_api_url
        head = self.head_start
        places = (basics.workspace_path, basics.folder.path / PRIVATE_AREA)
        if head is not None and not head.matches(
            target, api_url, token, guess, places, basics.identity
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
        known = self.known
        try:
            if head is not None:  # the entry point began the reads (run/headstart.py)
                try:
                    known.plan = await asyncio.wrap_future(head.plan)
                finally:
                    known.client = head.take_client()
                    if known.client is not None:
                        known.client.wire.waited = self.waited
            else:
                # Made in a thread (its TLS context takes a while): the engine's early start
                # and the clone go on meanwhile.
                known.client = await asyncio.to_thread(
                    GithubClient, token, api_url=api_url, waited=self.waited
                )
                known.plan = await asyncio.to_thread(resolve, known.client, target)
            url = known.plan.repository.clone_url
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
        progress.note(Step.TARGET, known.plan.describe())
        assert known.client is not None
        # Who may give the clone its task, asked of GitHub once per author.
        trust = Trust(known.client, known.plan)
        self.reads.open(known.plan, known.client, trust)
        self._gather_context(trust)
        self._check_stop()

    def waited(self, seconds: float, why: str) -> None:
        """Told from the client's thread: progress lines are whole appends under a lock."""
        self.basics.progress.note(
            self.known.step_now(), f"GitHub's {why}: waiting {seconds:.0f} s, as it asks"
        )

    def connect(self) -> GithubClient:
        """The client of a later launch with the network on: no target step made one."""
        basics = self.basics
        client = GithubClient(
            basics.secrets.github_token, api_url=basics.request.github_api_url, waited=self.waited
        )
        self.known.client = client
        return client

    def reopen_reads(self) -> None:
        """The reads of a later launch with the network on, for a resumed session."""
        plan = self.known.plan
        assert plan is not None
        client = self.connect()
        self.reads.open(plan, client, Trust(client, plan))

    def _clone(self, url: str, *, again: bool = False) -> asyncio.Future[None]:
        basics = self.basics
        token, identity = basics.secrets.github_token, basics.identity
        cache = repo_cache(os.environ)
        return asyncio.ensure_future(
            asyncio.to_thread(
                clone, basics.workspace_path, url, token, identity, again=again, cache=cache
            )
        )

    async def workspace(self) -> None:
        basics, known = self.basics, self.known
        assert known.plan is not None
        plan = known.plan
        assert self._cloning is not None  # begun by the target step
        await self._cloning
        head = self.head_start
        prepared = None if head is None else await asyncio.wrap_future(head.prepared)
        if prepared is not None:
            known.workspace = prepared  # by the entry point's thread (run/headstart.py)
        else:
            known.workspace = await asyncio.to_thread(
                prepare,
                basics.workspace_path,
                plan,
                basics.secrets.github_token,
                basics.folder.path / PRIVATE_AREA,
                basics.identity,
            )
        user = plan.user.name or plan.user.login
        basics.progress.note(
            Step.WORKSPACE,
            f"cloned {plan.repository.full_name} into {basics.workspace_path} as {user}; "
            f"base {known.workspace.base_ref[:12]}",
        )
        if not known.trusted_head():
            # Before any engine starts here: no file of the head's makes anything run.
            workspace = known.workspace
            taken = await asyncio.to_thread(take_from_base, workspace, basics.identity)
            basics.progress.note(Step.WORKSPACE, taken.describe(workspace.base_ref))
        allowed = f"only {plan.branch}" if plan.branch else "nothing (review only)"
        basics.progress.note(
            Step.HOOKS,
            f"pre-push hook installed: {allowed} may be pushed, never "
            f"{plan.repository.default_branch}",
        )
        self._check_stop()

    def _gather_context(self, trust: Trust) -> None:
        """Read the conversation beside the clone of the repository."""
        basics, known = self.basics, self.known
        assert known.plan is not None and known.client is not None
        self._gathering = asyncio.ensure_future(
            asyncio.to_thread(
                gather,
                known.client,
                known.plan,
                basics.request.requested_at,
                omit_strangers=basics.request.omit_strangers_text,
                images=basics.engine_area / CONTEXT_AREA,
                trust=trust,
            )
        )

    async def take_context(self) -> None:
        if self._gathering is None:
            return
        context = await self._gathering
        self._gathering = None
        self.known.conversation = context.prompt()
        self.known.open_threads = context.open_threads
        self.basics.progress.note(Step.TARGET, context.summary())

    def prompt(self, told: tuple[str, ...] = ()) -> str:
        """The working session's prompt: the target, the owner's words, the conversation, and
        what the engine is `told` of its workspace."""
        plan = self.known.plan
        assert plan is not None
        said: tuple[str, ...] = (*told, READS_SAID) if self.reads.enabled else told
        if self.known.open_threads and plan.mode is Mode.CONTINUE:
            said += (threads.ASK,)
        return build_prompt(plan, self.basics.request.instructions, self.known.conversation, said)

    def _check_stop(self) -> None:
        if self.basics.stop.is_set():
            raise Stopped
