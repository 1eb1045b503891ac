"""What every engine session that drives one process shares, whatever its protocol: the
process and its tree, the readers of its output, the tail of that output kept for a failure,
the supervision that turns its end into a `FinishedEvent`, and the words of that outcome.

A driver subclasses `ProcessSession`, reads its protocol in `_read_stdout`, and says in
`_outcome` how the process's end went; the rest is here, once.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import logging
import signal
from collections.abc import AsyncIterator

from shadowclone.errors import Refused
from shadowclone.plugin.processes import ProcessTree, read_stderr, until_finished
from shadowclone.plugin.types import EngineEvent, FinishedEvent, Outcome

log = logging.getLogger(__name__)

STOP_GRACE_S = 3.0
"""How long `stop()` lets the engine end on SIGTERM before its tree is killed."""
PIPE_DRAIN_S = 5.0
"""How long to wait for the last output once the process is gone."""
EXIT_POLL_S = 0.02
ABANDON_WAIT_S = 1.0
"""How long `abandon` waits for a killed process to be reaped (milliseconds, as a rule)."""
TAKEN_POLL_S = 0.01
"""How often `send` looks whether its queued message has gone to the model."""
OUTPUT_TAIL_LINES = 30
OUTPUT_LINE_LENGTH = 500


def exit_words(returncode: int) -> str:
    """How a process ended, in words: "was killed by SIGKILL", "exited with code 2"..."""
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    if returncode == 0:
        return "exited on its own before it was told to"
    return f"exited with code {returncode}"


class ProcessSession(abc.ABC):
    """One engine process behind an `EngineSession`: subclasses read its output and judge
    its end. `label` names the engine in outcomes and logs ("Claude Code")."""

    label = "the engine"

    def __init__(self, process: asyncio.subprocess.Process, tree: ProcessTree) -> None:
        self._process = process
        self._tree = tree
        self._events: asyncio.Queue[EngineEvent] = asyncio.Queue()
        self._tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL_LINES)
        self._stopping = False
        self._pending: list[str] = []
        """Messages waiting for the next turn, in the order they came."""
        # The tasks run from the caller's next await: the subclass sets its own state first.
        name = self.label.split()[-1].lower()
        self._readers = [
            asyncio.create_task(self._read_stdout(), name=f"{name}-stdout"),
            asyncio.create_task(self._read_stderr(), name=f"{name}-stderr"),
        ]
        self._watcher = asyncio.create_task(self._tree.watch(), name=f"{name}-tree")
        self._done = asyncio.create_task(self._supervise(), name=f"{name}-exit")

    @property
    def pid(self) -> int:
        return self._process.pid

    def events(self) -> AsyncIterator[EngineEvent]:
        return until_finished(self._events)

    # ---- for subclasses

    @abc.abstractmethod
    async def _read_stdout(self) -> None:
        """Read the engine's protocol from its standard output until it ends."""

    async def _stdout_lines(self) -> AsyncIterator[str]:
        """The process's output lines, decoded, the blank ones left out."""
        assert self._process.stdout is not None
        async for raw in self._process.stdout:
            text = raw.decode(errors="replace").rstrip("\n")
            if text.strip():
                yield text

    @abc.abstractmethod
    def _outcome(self, returncode: int) -> tuple[Outcome, str]:
        """How the session ended, judged from the exit code and what the driver saw."""

    def _keep(self, line: str) -> None:
        self._tail.append(line[:OUTPUT_LINE_LENGTH])

    def _with_tail(self, detail: str) -> str:
        if self._tail:
            detail += "; last output:\n" + "\n".join(self._tail)
        return detail

    def _failure(self, returncode: int, during_turn: bool, last_error: str) -> str:
        """The words of an end nobody asked for, with the engine's last error and output."""
        when = "during a turn" if during_turn else "between turns"
        detail = f"{self.label} {exit_words(returncode)} {when}"
        if last_error:
            detail += f"; its last error: {last_error}"
        return self._with_tail(detail)

    async def _until_taken(self, message: str) -> None:
        """Return once a message queued for the next turn went to the model: the owner is told
        it arrived only then."""
        while message in self._pending:
            if self._done.done():
                raise Refused(f"{self.label}'s session ended before it took the message")
            await asyncio.sleep(TAKEN_POLL_S)

    async def abandon(self) -> None:
        """Kill the process tree at once, for a session nobody will drive (a start that was
        cancelled), and return once the process is reaped and its pipes are closed, or after
        `ABANDON_WAIT_S`: the event loop may end right after, and must not outlive them."""
        self._tree.signal(signal.SIGKILL)
        await asyncio.wait({self._done}, timeout=ABANDON_WAIT_S)

    async def _end(self) -> None:
        """Stop: SIGTERM to the tree, then SIGKILL after `STOP_GRACE_S`."""
        self._stopping = True
        await self._tree.end(self._done, STOP_GRACE_S, self.label)

    # ---- the end

    async def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        await read_stderr(self._process.stderr, self._keep, self.label)

    async def _exited(self) -> int:
        """The exit code of the process we started, as soon as it exits.

        Not `Process.wait()`: on Python 3.11 it returns only once the pipes are closed too, and
        a launcher script (npm's for Codex on Node older than 22) may leave a child holding
        them after it died.
        """
        while (returncode := self._process.returncode) is None:
            await asyncio.sleep(EXIT_POLL_S)
        return returncode

    async def _supervise(self) -> None:
        """Wait for the process to end, clean up what it left, and report the outcome."""
        try:
            returncode = await self._exited()
            # Whatever it started dies with it, also so that no orphan holds our pipes open.
            self._tree.signal(signal.SIGKILL)
            _, late = await asyncio.wait(self._readers, timeout=PIPE_DRAIN_S)
            for reader in late:
                reader.cancel()
            try:
                await asyncio.wait_for(self._process.wait(), PIPE_DRAIN_S)
            except TimeoutError:
                log.warning("%s (pid %d) left its pipes open", self.label, self.pid)
        finally:
            self._watcher.cancel()
        outcome, detail = self._outcome(returncode)
        log.info("%s (pid %d) ended: %s %s", self.label, self.pid, outcome.value, detail[:200])
        self._events.put_nowait(FinishedEvent(outcome, detail))
