"""What a queued clone waits for, as serve's queue would decide: serve itself, the daily cost
cap, a slot, or its login (its usage limit, an overload, one clone at a time). `start`, `get`
and `follow` say it, so the owner knows why a clone has not started."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from shadowclone.config import Config
from shadowclone.errors import MalformedFile
from shadowclone.node import servelock as serve_lock
from shadowclone.node.admission import DAY, daily_cost_reason, spent_since
from shadowclone.node.clones import Clones
from shadowclone.node.schemas import State, Throttles, read
from shadowclone.node.views import CloneView

log = logging.getLogger("shadowclone.node.local")  # the node operations log under one name


class Waiting:
    """Reads serve's lock, its throttles and the other clones; writes nothing."""

    def __init__(self, config: Config, clones: Clones, clock: Callable[[], datetime]) -> None:
        self.config = config
        self.clones = clones
        self.clock = clock

    def spent_since(self, since: datetime) -> float:
        """What the clones requested since `since` have cost so far, as their engines reported
        it (serve folds it into their records): what `daily_cost_usd` caps."""
        return spent_since(self.clones.paths, self.clones.index, since)

    def throttles(self) -> dict[str, int]:
        """The logins serve holds back for an overload: how many of their clones may run."""
        if serve_lock.running(self.clones.paths) is None:
            return {}
        return self._throttles()

    def _throttles(self) -> dict[str, int]:
        """What serve last wrote of its holds (the caller knows serve runs)."""
        try:
            return dict(read(self.clones.paths.throttles_file, Throttles).limits)
        except FileNotFoundError:
            return {}
        except (OSError, MalformedFile) as error:
            log.warning("%s", error)
            return {}

    def waiting_for(self, view: CloneView) -> str:
        """Why a queued clone has not started, as serve's queue would decide; "" for others.

        The daily limit is not among the reasons: it is applied when a clone is admitted, so a
        queued clone is already counted."""
        if view.state is not State.QUEUED or view.stop_requested:
            return ""
        if serve_lock.running(self.clones.paths) is None:
            return (
                "serve, which is not running: start it with `shadowclone serve`, or keep it "
                "running with `shadowclone service install`"
            )
        active = self.clones.active()
        launched = [v for v in active if v.state.admitted]
        ahead = sum(
            1
            for v in active
            if v.state is State.QUEUED and (v.requested_at, v.id) < (view.requested_at, view.id)
        )
        queue = f"; {ahead} queued ahead of it" if ahead else ""
        cap = self.config.limits.daily_cost_usd
        if cap is not None and (spent := self.spent_since(self.clock() - DAY)) >= cap:
            return daily_cost_reason(spent, cap)
        if len(launched) >= self.config.parallel_clones:
            return (
                f"a slot: {len(launched)} clones running, parallel_clones = "
                f"{self.config.parallel_clones}{queue}"
            )
        with contextlib.suppress(OSError, MalformedFile):
            request = self.clones.folder(view.id).request()
            # The admitted clones of the same login, each request read once.
            same = [
                other
                for other in launched
                if self.clones.folder(other.id).request().login == request.login
            ]
            for other in same:
                until = other.scheduled_until
                if until is not None and until > self.clock():
                    return (
                        f"its login {request.login}, whose usage limit resets at "
                        f"{until.astimezone():%H:%M:%S} (clone {other.id} waits for it)"
                    )
            held = self._throttles().get(request.login)
            if held is not None and len(same) >= held:
                return (
                    f"its login {request.login}, whose provider is overloaded: serve runs at "
                    f"most {held} of its clones for now ({len(same)} running)"
                )
            if request.one_at_a_time and same:
                return (
                    f"its login {request.login}, which runs one clone at a time: clone "
                    f"{same[0].id} has it"
                )
        return f"serve to launch it{queue}"
