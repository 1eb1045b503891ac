"""The node: start, list, get, send, answer and stop clones on this machine.

The CLI and the MCP server are thin layers over `Node` (as `shadowclone.plugin.node.LocalNode`,
which adds the plugins' registry), itself a facade: each
operation is done by a part in a module of its own (`starting`, `clones` and `views`,
`waiting`, `following`, `talking`, `stopping`, `retention`), given only what it needs. The
parts are made afresh for each call from the node's current `config`, `paths` and `clock`,
which their owners may replace (serve follows its config file; tests move the clock).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import attrs

from shadowclone.config import Config, Paths
from shadowclone.node.admission import Login
from shadowclone.node.clones import DEFAULT_LIST_LIMIT, Clones
from shadowclone.node.engines import Engines
from shadowclone.node.following import follow
from shadowclone.node.index import CloneIndex
from shadowclone.node.retention import Removed, Retention
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Caps, InboxLine, ProgressLine, Via, now
from shadowclone.node.starting import START_LOCK_TIMEOUT_S, Starting
from shadowclone.node.stopping import STOP_LOCK_TIMEOUT_S, Stopping
from shadowclone.node.talking import Talking
from shadowclone.node.views import CloneView, Listing, Questions, read_view
from shadowclone.node.waiting import Waiting

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "START_LOCK_TIMEOUT_S",
    "STOP_LOCK_TIMEOUT_S",
    "CloneView",
    "Listing",
    "Node",
    "Questions",
]


class Node:
    """Operations on the clones of this machine. `engines` hands out the plugins' engines and
    logins (`shadowclone.plugin.node.LocalNode` loads them, a layer above); it is called only
    by a start that gets as far as its engine."""

    def __init__(
        self,
        config: Config,
        paths: Paths,
        engines: Callable[[], Engines[Login]],
        clock: Callable[[], datetime] = now,
    ) -> None:
        self.config = config
        self.paths = paths
        self.engines = engines
        self.clock = clock

    def _clones(self) -> Clones:
        return Clones(self.paths)

    def _waiting(self) -> Waiting:
        return Waiting(self.config, self._clones(), self.clock)

    # ------------------------------------------------------------------ start

    def start(
        self,
        target_text: str,
        engine: str | None = None,
        instructions: str = "",
        allow_secrets: bool = False,
        caps: Caps | None = None,
    ) -> CloneView:
        """Admit a clone; `allow_secrets`: it may push what looks like a secret (otherwise a
        secret found in its commits stops its push); `caps`: this clone's, each given one in
        place of the config's."""
        starting = Starting(self.config, self._waiting(), self.engines, self.clock)
        return starting.start(target_text, engine, instructions, allow_secrets, caps)

    @property
    def index(self) -> CloneIndex:
        return self._clones().index

    def active(self) -> builtins.list[CloneView]:
        """The queued, running and waiting clones."""
        return self._clones().active()

    def started_since(self, since: datetime) -> int:
        """Clones admitted since `since`: what the daily limit counts."""
        return self._clones().count_since(since)

    def spent_since(self, since: datetime) -> float:
        """What the clones requested since `since` have cost so far, as their engines reported
        it (serve folds it into their records): what `daily_cost_usd` caps."""
        return self._waiting().spent_since(since)

    # ------------------------------------------------------------------ reading

    def resolve(self, clone_id: str) -> RunFolder:
        """The run folder of an id, or of a unique prefix of one."""
        return self._clones().resolve(clone_id)

    def get(self, clone_id: str, lines: int = 20) -> CloneView:
        view = read_view(self.resolve(clone_id), lines=max(lines, 1))
        return attrs.evolve(view, waiting_for=self.waiting_for(view))

    def throttles(self) -> dict[str, int]:
        """The logins serve holds back for an overload: how many of their clones may run."""
        return self._waiting().throttles()

    def waiting_for(self, view: CloneView) -> str:
        """Why a queued clone has not started, as serve's queue would decide; "" for others."""
        return self._waiting().waiting_for(view)

    def list(self, include_all: bool = False, limit: int = DEFAULT_LIST_LIMIT) -> Listing:
        """Active clones and the most recent others (all of them with `include_all`)."""
        return self._clones().list(include_all, limit)

    def views(
        self, include_all: bool = False, limit: int = DEFAULT_LIST_LIMIT
    ) -> Iterator[CloneView | str]:
        """`list`, one clone (or one problem, as a string) at a time, newest first: all of
        them can be shown without holding them all."""
        return self._clones().views(include_all, limit)

    def follow(
        self,
        clone_id: str,
        lines: int = 20,
        poll_s: float = 1.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[ProgressLine]:
        """The last `lines` progress lines, then each new one as it is written, until the clone
        ends. `on_wait` hears what a queued clone waits for, first and whenever that changes.
        A generator: the id is resolved at the first line asked for, not at the call."""
        yield from follow(self.resolve(clone_id), self.waiting_for, lines, poll_s, on_wait)

    # ------------------------------------------------------------------ talking

    def send(self, clone_id: str, text: str, via: Via = Via.CLI) -> InboxLine:
        return Talking(self._clones(), self.clock).send(clone_id, text, via)

    def answer(self, clone_id: str, question_id: str, choice: str, via: Via = Via.CLI) -> InboxLine:
        return Talking(self._clones(), self.clock).answer(clone_id, question_id, choice, via)

    def stop(self, clone_id: str) -> CloneView:
        """Write the stop marker, under the clone's stop lock, which serve holds from its last
        look at the marker until the clone runs: so the view returned is what happens. A
        queued clone is `stopped` (it never starts, and its issue is free at once); one serve
        was launching is `running` (stop waited for the launch), and is stopped as any running
        clone. Only if a launch holds the lock for over `STOP_LOCK_TIMEOUT_S` is the marker
        written without it, the clone `queued` with `stop_requested` and `launching_at` set:
        serve stops it as soon as it runs."""
        return Stopping(self._clones(), self.clock).stop(clone_id)

    def resume(self, clone_id: str) -> CloneView:
        """A scheduled clone goes on now, not at its login's reset (the provider may refuse it
        again, and then it waits again)."""
        return Stopping(self._clones(), self.clock).resume(clone_id)

    # ------------------------------------------------------------------ retention

    def remove(self, clone_id: str) -> Removed:
        """Remove an ended clone's run folder (its workspace with it); see `retention`."""
        return self._retention().remove(self.resolve(clone_id))

    def prune(self, older_than: timedelta, dry_run: bool = False) -> builtins.list[Removed]:
        """Remove every clone that ended more than `older_than` ago, and finish what an
        earlier removal left; `dry_run`: only say which clones would go."""
        return self._retention().prune(self.index, self.clock() - older_than, dry_run)

    def _retention(self) -> Retention:
        return Retention(self.paths.clones_dir, self.paths.active_dir)
