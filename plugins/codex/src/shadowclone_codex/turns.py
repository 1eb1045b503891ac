"""What the Codex driver knows of its thread's turns, told by Codex's answers and notifications.

Kept apart from the session, with no I/O, so the rules that decide between steering and
interrupting (docs/engines.md) read in one place: which turn runs, whether a tool of it runs,
which steered messages Codex has not shown yet, which commands an interrupted turn left.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import shlex
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import psutil
from shadowclone.plugin import ProcessTree

log = logging.getLogger(__name__)

_NOT_TOOLS = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "contextCompaction"})
"""Item types that are the conversation itself; every other item is a tool the model waits on."""


def text_input(messages: Sequence[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": message} for message in messages]


class Turns:
    """The thread's turns as the driver has seen them."""

    def __init__(self) -> None:
        self.running: str | None = None
        """The running turn, from `turn/start` until its `turn/completed`."""
        self._finished: set[str] = set()
        self._tools_running: set[str] = set()
        """Ids of the running turn's tool items that have started and not completed."""
        self._commands: dict[str, str] = {}
        """The running turn's shell commands that have not completed, by item id."""
        self._interrupted: dict[str, list[str]] = {}
        """Turns interrupted for a message -> the commands they were running."""
        self._steered: dict[str, tuple[str, str]] = {}
        """Client message id -> (turn id, message) of steers Codex has not yet shown."""
        self._message_ids = (f"shadowclone-{uuid.uuid4().hex[:8]}-{n}" for n in itertools.count())

    def message_id(self) -> str:
        """A new client message id, by which Codex names the message when it shows it."""
        return next(self._message_ids)

    @property
    def in_tool(self) -> bool:
        """A turn runs a tool: a steered message would wait for it to end."""
        return self.running is not None and bool(self._tools_running)

    def started(self, turn_id: str) -> None:
        """Codex started `turn_id` (its answer and `turn/started` may come in either order,
        and after its `turn/completed`)."""
        if turn_id not in self._finished:
            self.running = turn_id

    def interrupting(self, turn_id: str) -> bool:
        """Note that `turn_id` is interrupted for a message, with the commands it runs now;
        False if it already was."""
        if turn_id in self._interrupted:
            return False
        self._interrupted[turn_id] = list(self._commands.values())
        return True

    def steering(self, client_id: str, turn_id: str, message: str) -> None:
        """`message` goes into `turn_id` (noted before Codex answers: it may show it first)."""
        self._steered[client_id] = (turn_id, message)

    def not_steered(self, client_id: str) -> bool:
        """Forget a steer Codex did not take; False if it showed the message meanwhile."""
        return self._steered.pop(client_id, None) is not None

    def item(self, method: str, item: Mapping[str, Any]) -> None:
        """An `item/started` or `item/completed`: a steered message shown, or a tool."""
        if item.get("type") == "userMessage":
            self._steered.pop(str(item.get("clientId")), None)
        elif item.get("type") not in _NOT_TOOLS:
            item_id = str(item.get("id"))
            if method == "item/started":
                self._tools_running.add(item_id)
                if item.get("type") == "commandExecution" and item.get("command"):
                    self._commands[item_id] = str(item.get("command"))
            else:
                self._tools_running.discard(item_id)
                self._commands.pop(item_id, None)

    def completed(self, turn_id: str) -> tuple[list[str], list[str]]:
        """`turn_id` is over: the commands it ran when it was interrupted for a message, and
        the messages steered into it that Codex never showed, which go to the next turn."""
        self._finished.add(turn_id)
        if self.running == turn_id:
            self.running = None
            self._tools_running.clear()
            self._commands.clear()
        commands = self._interrupted.pop(turn_id, [])
        unseen = [
            client_id for client_id, (steered, _) in self._steered.items() if steered == turn_id
        ]
        return commands, [self._steered.pop(client_id)[1] for client_id in unseen]


def end_commands(tree: ProcessTree, own_pid: int, commands: Sequence[str]) -> None:
    """End the shell commands of a turn interrupted for a message: Codex leaves them running
    in the background, where the model no longer follows them."""
    if not commands:
        return
    tree.refresh()
    for process in tree.alive():
        with contextlib.suppress(psutil.Error):
            argv = process.cmdline()
            if process.pid == own_pid or not argv or shlex.join(argv) not in commands:
                continue
            doomed = [process, *process.children(recursive=True)]
            log.info("ending the interrupted command %r (pid %d)", argv, process.pid)
            for each in doomed:
                with contextlib.suppress(psutil.Error):
                    each.kill()
