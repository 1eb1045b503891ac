"""What the run program's phases share: what the clone is launched with (`Basics`) and what
its phases learn on the way (`Known`).

Apart from the phases (run/program.py, targeting.py, working.py, handoff.py) because each
of them reads the target another one found: one object passed to all says where it is kept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs

from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Request, Step
from shadowclone.plugin.manager import Registry
from shadowclone.plugin.types import NetworkMode
from shadowclone.proxy.secrets import Secrets
from shadowclone.run.github import GithubClient, ReviewThread
from shadowclone.run.headstart import PRIVATE_AREA
from shadowclone.run.identity import EngineIdentity
from shadowclone.run.plan import Plan
from shadowclone.run.progress import ProgressWriter
from shadowclone.run.workspace import Workspace


@attrs.frozen
class Basics:
    """What the clone is launched with, the same for every phase."""

    folder: RunFolder
    request: Request
    secrets: Secrets
    registry: Registry
    identity: EngineIdentity
    progress: ProgressWriter
    stop: asyncio.Event
    workspace_path: Path
    engine_area: Path
    """The engine's corner of the run folder: its home, state folders and the ask server's
    lines; nothing the run program trusts is kept there."""

    def redact(self, text: str) -> str:
        return self.secrets.redactor(text)

    def workspace_for(self, base_ref: str) -> Workspace:
        """The workspace an earlier launch prepared, at its base."""
        return Workspace(
            self.workspace_path,
            self.secrets.github_token,
            base_ref,
            self.folder.path / PRIVATE_AREA,
            self.identity,
        )


@attrs.define
class Known:
    """What the phases found out: the target, its workspace and the conversation."""

    plan: Plan | None = None
    workspace: Workspace | None = None
    client: GithubClient | None = None
    conversation: str = ""
    """The issue's or pull request's conversation, as the engine reads it."""
    open_threads: list[ReviewThread] = attrs.Factory(list)
    """A continued pull request's open review threads, answered after the push."""
    network: NetworkMode = NetworkMode.OPEN
    """The network this launch was given (its handoff's)."""

    def trusted_head(self) -> bool:
        """Whether the checked-out head is the owner's (an issue's new branch, the owner's own
        pull request), so that the engine may load the repository's own settings: never for
        a review, whose head someone else wrote, nor before the target is known."""
        return self.plan is not None and self.plan.owner_wrote

    def step_now(self) -> Step:
        if self.plan is None:
            return Step.TARGET
        if self.workspace is None:
            return Step.WORKSPACE
        return Step.ENGINE
