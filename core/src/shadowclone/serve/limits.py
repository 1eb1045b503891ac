"""The queue: which queued clones may start now. `parallel_clones`, one at a time per login
that asks it, logins held back after their provider said it is overloaded, and the daily
cost cap.

Kept apart from the loop: its state (the throttles, the last reckoning of the cost) is its
own, and `get` and `status` read the throttles from the file it writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

import attrs

from shadowclone.node import schemas
from shadowclone.node.schemas import State, Throttles
from shadowclone.serve.clones import Clone, Current, ServeSettings

log = logging.getLogger(__name__)


@attrs.define
class Throttle:
    limit: int
    since: float
    """When the login was last heard overloaded, or its limit last grew (monotonic)."""


class LoginLimits:
    """The logins held back for an overload, and whether the day's cost is spent."""

    def __init__(
        self,
        current: Current,
        settings: ServeSettings,
        clones: dict[str, Clone],
        clock: Callable[[], datetime],
    ) -> None:
        self.current = current
        self.settings = settings
        self.clones = clones
        """serve's own map of the clones it follows: an overload halves what runs of it."""
        self.clock = clock
        self.throttles: dict[str, Throttle] = {}
        """Logins whose provider said "overloaded": how many of their clones may run now."""
        self._told: dict[str, int] | None = None
        """The limits last written to `throttles_file`."""
        self.spent: tuple[float, float] | None = None
        """(when, how much): the last reckoning of the daily cost, kept a moment; None to
        reckon it again (a new cap)."""

    def overloaded(self, login: str) -> None:
        """Halve how many clones of `login` may run (at least one), once per quiet spell."""
        running = sum(1 for c in self.clones.values() if c.launched and c.request.login == login)
        moment = time.monotonic()
        throttle = self.throttles.get(login)
        if throttle is not None and moment - throttle.since < self.settings.overload_restore_s:
            throttle.since = moment  # the same storm: it lasts longer
            return
        limit = max(1, min(throttle.limit if throttle else running, running) // 2)
        self.throttles[login] = Throttle(limit, moment)
        log.info(
            "the provider of login %s is overloaded: at most %d of its clones run", login, limit
        )
        self.tell()

    def limits(self) -> dict[str, int]:
        """The logins held back for an overload, each limit grown back by one per quiet
        `overload_restore_s` and dropped once it reaches `parallel_clones`."""
        moment = time.monotonic()
        for login, throttle in list(self.throttles.items()):
            if moment - throttle.since >= self.settings.overload_restore_s:
                throttle.limit += 1
                throttle.since = moment
                if throttle.limit >= self.current.config.parallel_clones:
                    del self.throttles[login]
                    log.info("the provider of login %s is no longer held back", login)
        self.tell()
        return {login: throttle.limit for login, throttle in self.throttles.items()}

    def tell(self) -> None:
        """Write the logins held back, when that changed, for `get` and `status`; serve's
        own choices never read the file."""
        limits = {login: throttle.limit for login, throttle in self.throttles.items()}
        if limits == self._told:
            return
        throttles_file = self.current.paths.throttles_file
        try:
            schemas.write(throttles_file, Throttles(limits))
        except OSError as error:
            log.warning("cannot write %s: %s", throttles_file, error)
            return
        self._told = limits

    def over_daily_cost(self) -> bool:
        """`daily_cost_usd` is spent: queued clones wait (reckoned at most every poll)."""
        from shadowclone.node.admission import DAY, daily_cost_reason, spent_since
        from shadowclone.node.index import CloneIndex

        config, paths = self.current.config, self.current.paths
        cap = config.limits.daily_cost_usd
        if cap is None:
            return False
        moment = time.monotonic()
        if self.spent is None or moment - self.spent[0] >= self.settings.status_poll_s:
            spent = spent_since(paths, CloneIndex(paths.clones_dir), self.clock() - DAY)
            if spent >= cap and (self.spent is None or self.spent[1] < cap):
                log.info("queued clones wait for %s", daily_cost_reason(spent, cap))
            self.spent = (moment, spent)
        return self.spent[1] >= cap

    def launch_queued(
        self,
        launch: Callable[[Clone], None],
        sync: Callable[[Clone], None],
        guard: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        """Queued clones start in request order, at most `parallel_clones` at once, and one at
        a time per login that allows only one, and none past an overload's limit or the daily
        cost cap. A stopped one is `sync`ed (it never starts); `launch` launches the others."""
        running = [c for c in self.clones.values() if c.record.state.admitted]
        queued = sorted(
            (c for c in self.clones.values() if c.record.state is State.QUEUED),
            key=lambda c: (c.request.requested_at, c.id),
        )
        busy = {c.request.login for c in running}
        moment = self.clock()
        # A login whose usage limit is reached takes no new clone until it resets.
        limited = {
            c.request.login
            for c in running
            if c.record.scheduled_until is not None and c.record.scheduled_until > moment
        }
        if queued and self.over_daily_cost():
            return
        throttled = self.limits()  # grown back on time, also with no queue
        per_login: dict[str, int] = {}
        for c in running:
            per_login[c.request.login] = per_login.get(c.request.login, 0) + 1
        for clone in queued:
            if len(running) >= self.current.config.parallel_clones:
                return
            if clone.request.one_at_a_time and clone.request.login in busy:
                continue
            if clone.request.login in limited:
                continue
            login = clone.request.login
            if login in throttled and per_login.get(login, 0) >= throttled[login]:
                continue
            with guard(clone.id):
                if clone.folder.stop_marker() is not None:
                    sync(clone)  # stopped in the queue: never starts
                    continue
                launch(clone)
            if clone.record.state.admitted:
                running.append(clone)
                busy.add(clone.request.login)
                per_login[login] = per_login.get(login, 0) + 1
