"""The run program's entry point: a first launch's clone and GitHub reads begin before the run
program is imported.

Importing the run program takes a Python process about 0.13 s in the clone image, and the
clone's first two steps need little of it: cloning the repository and reading the target wait
on the network and on git. So the entry point reads what they need straight from the request
and the secrets file, starts git and the reads (in a thread), and only then imports the rest;
the target step takes what they found. What it read is checked against the request as the run
program parses it: a head start that does not match is thrown away, never used.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from shadowclone import contract
from shadowclone.run.cloning import clone_url_for, end_clone, start_clone

if TYPE_CHECKING:
    import concurrent.futures

    from shadowclone.node.target import Target
    from shadowclone.run.github import GithubClient
    from shadowclone.run.plan import Plan

HANDOFF_FILE = "handoff.json"
"""A relaunch's phase (the run folder's `handoff_file`): such a launch resolves nothing."""
MAX_REQUEST_BYTES = 1024 * 1024


TargetFields = tuple[str, str, int, str | None]
"""A target's owner, repository, number and kind, as the request holds them."""


class HeadStart:
    """A first launch's clone of the guessed address and its target's reads, under way."""

    def __init__(
        self, target: TargetFields, api_url: str, token: str, guess: str | None, workspace: Path
    ) -> None:
        self.target = target
        self.api_url = api_url
        self.token = token
        self.guess = guess
        """The address cloned from, if any (`clone_url_for`)."""
        self.workspace = workspace
        self.cloning: subprocess.Popen[str] | None = None
        self.plan: concurrent.futures.Future[Plan]
        """What the reads found (set when they begin: its module is imported after git starts)."""
        self.client: GithubClient | None = None
        """The reads' client: the target step takes it, or `close` closes it."""

    @classmethod
    def begin(cls, environ: Mapping[str, str]) -> HeadStart | None:
        """Start the clone and the reads of the run folder's request, if this launch is a first
        one whose request and secrets read plainly; None otherwise (the run program then does
        it all itself, and says what is wrong where it belongs)."""
        folder = Path(environ.get(contract.RUN_FOLDER_VARIABLE) or contract.CONTAINER_RUN_FOLDER)
        secrets = Path(environ.get(contract.SECRETS_VARIABLE) or contract.CONTAINER_SECRETS_FILE)
        workspace = environ.get(contract.WORKSPACE_VARIABLE)
        try:
            if (folder / HANDOFF_FILE).exists():
                return None
            request = json.loads(_read_plain(folder / "request.json"))
            token = tomllib.loads(secrets.read_text(encoding="utf-8")).get("github_token")
        except (OSError, ValueError):
            return None
        read = _plain_request(request)
        if read is None or not isinstance(token, str) or not token.strip():
            return None
        (owner, repo, number, kind), github_url, api_url = read
        guess = clone_url_for(github_url, f"{owner}/{repo}")
        head = cls(
            (owner, repo, number, kind),
            api_url,
            token.strip(),
            guess,
            Path(workspace) if workspace else folder / "workspace",
        )
        if guess is not None:
            # Made as the run program makes what it shares with the engine (`prepare` then
            # shares the whole work tree with it).
            umask = contract.SHARED_UMASK if environ.get(contract.ENGINE_USER_VARIABLE) else -1
            try:
                head.cloning = start_clone(head.workspace, guess, head.token, umask=umask)
            except OSError:
                return None
        import concurrent.futures

        from shadowclone.node.target import Target
        from shadowclone.run.github import GithubClient

        head.plan = concurrent.futures.Future()
        try:
            # Made here, not in the reads' thread, where its imports and its TLS context would
            # wait for the run program's imports.
            head.client = GithubClient(head.token, api_url=api_url)
        except Exception as error:  # noqa: BLE001 - the target step tells it, as its own
            head.plan.set_exception(error)
            return head
        reads = threading.Thread(
            target=head._read, args=(Target(*head.target), head.client), daemon=True
        )
        reads.start()
        return head

    def _read(self, target: Target, client: GithubClient) -> None:
        from shadowclone.run.plan import resolve

        try:
            self.plan.set_result(resolve(client, target))
        except BaseException as error:  # noqa: BLE001 - handed to the target step as is
            self.plan.set_exception(error)

    def matches(
        self, target: Target, api_url: str, token: str, guess: str | None, workspace: Path
    ) -> bool:
        """Whether this head start did what the target step would: the same reads, the same
        clone into the same place."""
        read = (target.owner, target.repo, target.number, target.kind)
        mine = (self.target, self.api_url, self.token, self.guess, self.workspace)
        return mine == (read, api_url, token, guess, workspace)

    def take_clone(self) -> subprocess.Popen[str] | None:
        cloning, self.cloning = self.cloning, None
        return cloning

    def take_client(self) -> GithubClient | None:
        client, self.client = self.client, None
        return client

    def close(self) -> None:
        """End what nobody took: the clone's git (killed and waited for) and the client."""
        cloning = self.take_clone()
        if cloning is not None:
            end_clone(cloning)
        client = self.take_client()
        if client is not None:
            client.close()  # reads still under way fail, and nobody waits for them


def _read_plain(path: Path) -> bytes:
    """A plain file's bytes (not a link, a FIFO or a device; at most `MAX_REQUEST_BYTES`)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a plain file")
        data = handle.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise ValueError(f"{path} is larger than {MAX_REQUEST_BYTES} bytes")
    return data


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


def main_exit() -> NoReturn:
    """The entry point `shadowclone-run` (and `python -m shadowclone.run`)."""
    head = HeadStart.begin(os.environ)
    from shadowclone.run.program import main_exit as run_program

    run_program(head)
