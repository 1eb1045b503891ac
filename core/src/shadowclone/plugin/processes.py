"""Ending an engine's whole process tree, for engine plugins.

Engines start tools in sessions of their own: Claude Code's Bash tool starts each command in a
new session, Codex runs commands under a terminal of their own, and the npm launchers may run
the native binary as a child of Node. So signalling one process group is not enough, and a
launcher killed alone can leave the binary running with the driver's pipes. Two nets catch the
tree instead: every process seen in it while it runs (`watch`), known by pid and start time so
a reused pid is never signalled; and every process whose environment carries the session's
marker variable, which the engine's children inherit even after they are re-parented (the way
Jenkins finds a build's processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import psutil

from shadowclone.errors import PluginUnavailable
from shadowclone.plugin.types import EngineEvent, FinishedEvent

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.5
TREE_MARKER = "SHADOWCLONE_ENGINE_TREE"
"""The variable, with a value of its own per engine process, that its whole tree inherits."""
LINE_LIMIT = 64 * 1024 * 1024
"""Engines write very long JSON lines (a whole file in one tool result)."""


async def until_finished(events: asyncio.Queue[EngineEvent]) -> AsyncIterator[EngineEvent]:
    """A session's queued events, in order, up to and including its `FinishedEvent`."""
    while True:
        event = await events.get()
        yield event
        if isinstance(event, FinishedEvent):
            return


async def read_stderr(stream: asyncio.StreamReader, keep: Callable[[str], None], name: str) -> None:
    """Keep each line an engine writes to stderr (for a failure's detail), and log it."""
    async for raw in stream:
        text = raw.decode(errors="replace").rstrip("\n")
        if text.strip():
            keep(text)
            log.debug("%s stderr: %s", name, text)


async def spawn_engine(
    program: str,
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    install_hint: str,
    run_as: Sequence[str] = (),
) -> tuple[asyncio.subprocess.Process, ProcessTree]:
    """Start an engine program with pipes on stdin, stdout and stderr, in a session of its own
    and marked so that `ProcessTree` finds all it starts; `install_hint` says how to get the
    program when it is not on the PATH of `env`. `run_as` (`EngineTask.run_as`) goes first:
    it starts the program as the engine's own user."""
    found = shutil.which(program, path=env.get("PATH"))
    if found is None:
        raise PluginUnavailable(f"the program {program!r} is not on PATH; {install_hint}")
    marker = uuid.uuid4().hex
    process = await asyncio.create_subprocess_exec(
        *run_as,
        found,
        *args,
        cwd=cwd,
        env={**env, TREE_MARKER: marker},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group: a stop reaches everything it started
        limit=LINE_LIMIT,
        # What the engine creates in the shared workspace, the run program can read.
        umask=0o007 if run_as else -1,
    )
    return process, ProcessTree(process.pid, (TREE_MARKER, marker))


def _status(process: psutil.Process) -> str | None:
    try:
        return process.status()
    except psutil.Error:
        return None


class ProcessTree:
    """The processes an engine started, remembered from the moment they were seen."""

    def __init__(self, root_pid: int, marker: tuple[str, str] | None = None) -> None:
        self.root_pid = root_pid
        self.marker = marker
        """An environment variable and value that only this tree's processes carry."""
        self._seen: dict[int, float] = {}
        self._remember(root_pid)

    def _remember(self, pid: int) -> None:
        with contextlib.suppress(psutil.Error):
            self._seen.setdefault(pid, psutil.Process(pid).create_time())

    def refresh(self) -> None:
        """Remember every current descendant of the root."""
        try:
            descendants = psutil.Process(self.root_pid).children(recursive=True)
        except psutil.Error:
            return
        for process in descendants:
            self._remember(process.pid)

    async def watch(self) -> None:
        """Refresh until cancelled, so short-lived branches are known when the root dies."""
        while True:
            self.refresh()
            await asyncio.sleep(WATCH_INTERVAL_S)

    def _marked(self) -> list[psutil.Process]:
        if self.marker is None:
            return []
        key, value = self.marker
        found = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if process.pid != os.getpid() and process.environ().get(key) == value:
                    found.append(process)
        return found

    def alive(self) -> list[psutil.Process]:
        """The tree's processes still running: remembered ones (same pid and start time) and
        marked ones, zombies left out."""
        found = {process.pid: process for process in self._marked()}
        for pid, started in list(self._seen.items()):
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                if process.create_time() == started:
                    found.setdefault(pid, process)
        return [
            process
            for process in found.values()
            if _status(process) not in (None, psutil.STATUS_ZOMBIE)
        ]

    def signal(self, signum: signal.Signals) -> int:
        """Send `signum` to every live process of the tree and to their process groups; return
        how many processes were signalled."""
        self.refresh()
        processes = self.alive()
        own_group = os.getpgrp()
        groups: set[int] = set()
        for process in processes:
            # A process may end between `alive()` and here: psutil and os both say so.
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                groups.add(os.getpgid(process.pid))
                process.send_signal(signum)
        for group in groups - {own_group, 0, 1}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signum)
        if processes:
            log.debug(
                "sent %s to %d processes in %d groups", signum.name, len(processes), len(groups)
            )
        return len(processes)

    async def end(self, finished: asyncio.Future[None], grace_s: float, what: str) -> None:
        """SIGTERM the tree, then SIGKILL it if `finished` is not done within `grace_s`; wait for
        `finished` either way."""
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(finished), grace_s)
        except TimeoutError:
            log.info("%s (pid %d) outlived SIGTERM; killing its tree", what, self.root_pid)
            self.signal(signal.SIGKILL)
            await finished
