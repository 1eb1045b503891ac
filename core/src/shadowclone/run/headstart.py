"""The entry point's head start (run/entry.py): a first launch's clone, GitHub reads and
workspace begin before the run program is imported.

Importing the run program takes a Python process about 0.13 s in the clone image, and the
clone's first steps need little of it: cloning the repository and reading the target wait on
the network, preparing the workspace on git. So the entry point reads what they need straight
from the request and the secrets file, starts git, then the reads and, once both are done, the
workspace's preparation in a thread, and only then imports the rest; the target and workspace
steps take what they found. What it read is checked against the request as the run program
parses it: a head start that does not match is thrown away, never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from shadowclone import contract, files
from shadowclone.errors import ShadowcloneError
from shadowclone.run.cloning import (
    clone_url_for,
    finish_clone,
    kill_clone,
    repo_cache,
    start_clone,
)

if TYPE_CHECKING:
    import concurrent.futures

    from shadowclone.node.target import Target
    from shadowclone.run.github import GithubClient
    from shadowclone.run.identity import EngineIdentity
    from shadowclone.run.plan import Plan
    from shadowclone.run.workspace import Workspace

PRIVATE_AREA = "private"
"""The run program's own folder in the run folder (its git directory: `workspace.prepare`)."""


TargetFields = tuple[str, str, int, str | None]
"""A target's owner, repository, number and kind, as the request holds them."""


class _Reads(NamedTuple):
    """What the target's reads are of, and how they reach GitHub: what `matches` compares."""

    target: TargetFields
    api_url: str
    token: str


class _Preparation:
    """The workspace's preparation (in the head start's thread) racing `close`: once closed,
    none begins; one under way is waited for, as it runs local git only."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._under_way = False

    def begin(self) -> bool:
        """Whether the preparation may begin (nothing closed the head start yet)."""
        with self._lock:
            if self._closed:
                return False
            self._under_way = True
            return True

    def close(self) -> bool:
        """Let no preparation begin; whether one is under way."""
        with self._lock:
            self._closed = True
            return self._under_way

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


class HeadStart:
    """A first launch's clone of the guessed address and its target's reads, under way."""

    def __init__(self, reads: _Reads, guess: str | None, workspace: Path, private: Path) -> None:
        self.reads = reads
        self.guess = guess
        """The address cloned from, if any (`clone_url_for`)."""
        self.workspace = workspace
        self.private = private
        self.cloning: subprocess.Popen[str] | None = None
        """git cloning `guess`; the thread waits for it, `close` kills it."""
        # Set when the thread begins (their module is imported after git starts):
        self.plan: concurrent.futures.Future[Plan]
        """What the reads found."""
        self.cloned: concurrent.futures.Future[None]
        """The clone of `guess`, done or failed (done at once when there is none)."""
        self.prepared: concurrent.futures.Future[Workspace | None]
        """The workspace, prepared when the clone of `guess` is the repository's and the
        target is an issue or the owner's pull request (no network on the way); else None."""
        self.client: GithubClient | None = None
        """The reads' client: the target step takes it, or `close` closes it."""
        self.identity: EngineIdentity | None = None
        """The engine's identity the launcher named, whose group the workspace was shared with
        before git ran (None: one the run program refuses)."""
        self._preparation = _Preparation()

    @classmethod
    def begin(cls, environ: Mapping[str, str]) -> HeadStart | None:
        """Start the clone and the reads of the run folder's request, if this launch is a first
        one whose request and secrets read plainly; None otherwise (the run program then does
        it all itself, and says what is wrong where it belongs)."""
        folder = Path(environ.get(contract.RUN_FOLDER_VARIABLE) or contract.CONTAINER_RUN_FOLDER)
        secrets = Path(environ.get(contract.SECRETS_VARIABLE) or contract.CONTAINER_SECRETS_FILE)
        workspace = environ.get(contract.WORKSPACE_VARIABLE)
        try:
            if (folder / contract.HANDOFF_FILE).exists():  # a relaunch resolves nothing
                return None
            request = json.loads(files.read_bounded(folder / contract.REQUEST_FILE))
            values = tomllib.loads(secrets.read_text(encoding="utf-8"))
            token = values.get(contract.GITHUB_TOKEN_KEY)
        except (OSError, ValueError, ShadowcloneError):
            return None
        read = _plain_request(request)
        if read is None or not isinstance(token, str) or not token.strip():
            return None
        shared_gid = None
        if environ.get(contract.ENGINE_USER_VARIABLE):
            group = environ.get(contract.SHARED_GROUP_VARIABLE, "").strip()
            if not (group.isascii() and group.isdigit() and int(group) > 0):
                return None  # the run program says what is wrong
            shared_gid = int(group)
        (owner, repo, number, kind), github_url, api_url = read
        guess = clone_url_for(github_url, f"{owner}/{repo}")
        head = cls(
            _Reads((owner, repo, number, kind), api_url, token.strip()),
            guess,
            Path(workspace) if workspace else folder / "workspace",
            folder / PRIVATE_AREA,
        )
        if shared_gid is not None:
            # As the run program sets it: what it makes in the workspace the engine may change.
            os.umask(contract.SHARED_UMASK)
        if guess is not None:
            try:
                cache = repo_cache(environ)
                head.cloning = start_clone(
                    head.workspace, guess, head.reads.token, shared_gid, cache
                )
            except OSError:
                return None
        import concurrent.futures

        from shadowclone.node.target import Target
        from shadowclone.run.github import GithubClient
        from shadowclone.run.identity import engine_identity

        with contextlib.suppress(ShadowcloneError):  # the run program says what is wrong
            identity = engine_identity(environ)
            if identity.workspace_gid == shared_gid:  # read here apart, before git started
                head.identity = identity

        head.plan = concurrent.futures.Future()
        head.cloned = concurrent.futures.Future()
        head.prepared = concurrent.futures.Future()
        try:
            # Made here, not in the thread, where its imports and its TLS context would wait
            # for the run program's imports.
            head.client = GithubClient(head.reads.token, api_url=api_url)
        except Exception as error:  # noqa: BLE001 - the target step tells it, as its own
            head.plan.set_exception(error)
        if head.cloning is None:
            head.cloned.set_result(None)
        else:
            cloning = threading.Thread(target=head._wait_for_clone, name="head-start-clone")
            cloning.daemon = True
            cloning.start()
        thread = threading.Thread(
            target=head._work,
            args=(Target(*head.reads.target), head.client),
            name="head-start",
            daemon=True,
        )
        head._preparation.thread = thread
        thread.start()
        return head

    def _wait_for_clone(self) -> None:
        assert self.cloning is not None
        try:
            finish_clone(self.cloning)
        except BaseException as error:  # noqa: BLE001 - handed to the workspace step as is
            self.cloned.set_exception(error)
        else:
            self.cloned.set_result(None)

    def _work(self, target: Target, client: GithubClient | None) -> None:
        """The reads, then the workspace's preparation once they and the clone went well."""
        from shadowclone.run.plan import Mode, resolve
        from shadowclone.run.workspace import prepare

        plan = None
        if client is not None:
            try:
                plan = resolve(client, target)
            except BaseException as error:  # noqa: BLE001 - handed to the target step as is
                self.plan.set_exception(error)
            else:
                self.plan.set_result(plan)
        cloned = self.cloned.exception() is None  # waits for the clone's end
        identity = self.identity
        if plan is None or not cloned or identity is None:
            self.prepared.set_result(None)
            return
        if plan.repository.clone_url != self.guess or plan.mode is Mode.REVIEW:
            self.prepared.set_result(None)  # cloned again, or fetched: the step does it
            return
        if not self._preparation.begin():
            self.prepared.set_result(None)
            return
        try:
            workspace = prepare(self.workspace, plan, self.reads.token, self.private, identity)
        except BaseException as error:  # noqa: BLE001 - handed to the workspace step as is
            self.prepared.set_exception(error)
        else:
            self.prepared.set_result(workspace)

    def matches(
        self,
        target: Target,
        api_url: str,
        token: str,
        guess: str | None,
        places: tuple[Path, Path],
        identity: EngineIdentity,
    ) -> bool:
        """Whether this head start did what the target and workspace steps would: the same
        reads, the same clone into the same `places` (workspace, private folder), shared with
        the same engine identity."""
        read = (target.owner, target.repo, target.number, target.kind)
        mine = (*self.reads, self.guess, self.workspace, self.private)
        theirs = (read, api_url, token, guess, *places)
        return mine == theirs and self.identity == identity

    def take_client(self) -> GithubClient | None:
        client, self.client = self.client, None
        return client

    def close(self) -> None:
        """End what is under way: git is killed and the client closed (reads still under way
        fail, and nothing is prepared after them); a preparation under way (local git only)
        is waited for."""
        preparing = self._preparation.close()
        if self.cloning is not None:
            kill_clone(self.cloning)  # its thread waits for it
        client = self.take_client()
        if client is not None:
            client.close()
        if preparing:
            self._preparation.join()


def _plain_request(request: Any) -> tuple[TargetFields, str, str] | None:
    """The target, the GitHub URL and the API URL of a first launch's request, or None if the
    request is anything but a plain one (the run program parses it properly)."""
    if not isinstance(request, dict) or request.get("mode", "clone") != "clone":
        return None
    target, github_url, api_url = (
        request.get("target"),
        request.get("github_url"),
        request.get("github_api_url"),
    )
    if not isinstance(target, dict) or not isinstance(github_url, str):
        return None
    if not isinstance(api_url, str):
        return None
    owner, repo, number, kind = (target.get(key) for key in ("owner", "repo", "number", "kind"))
    if not (isinstance(owner, str) and isinstance(repo, str)):
        return None
    if type(number) is not int or not (kind is None or isinstance(kind, str)):
        return None
    return (owner, repo, number, kind), github_url, api_url
