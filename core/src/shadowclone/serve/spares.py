"""serve's spares (node/spares.py): after each clone it launches, serve has the launcher start
the container of the next clone of that kind in a spare folder, on a thread of its own, so
that clone's launch only names it its clone.

At most `spares` wait at once, one per kind, the kinds launched last kept (as serve starts,
those of the clones requested last). serve gives its
spares up when it stops; as it starts it removes what an earlier one left, except the
containers in the folders of queued clones (a start took them while no serve ran: their
launch takes them up); and every minute or so it removes those that no clone will take up
(taken by a clone stopped in the queue, or by a start that died).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from shadowclone.node import spares
from shadowclone.plugin import contract
from shadowclone.plugin.launcher_parts import SpareLauncher
from shadowclone.plugin.types import Launcher, LaunchSpec, NetworkMode

log = logging.getLogger(__name__)

OF_THE_CLONE = frozenset({contract.LABEL_CLONE, contract.LABEL_TARGET, contract.CLONE_ID_VARIABLE})
"""The labels and variables that name the clone: a spare has none of them."""

SPARE_DELAY_S = 2.0
"""serve's default `ServeSettings.spare_delay_s`."""


class Spares:
    def __init__(
        self, clones_dir: Path, launcher: Launcher, most: int, delay_s: float = SPARE_DELAY_S
    ) -> None:
        self.clones_dir = clones_dir
        self.delay_s = delay_s
        self.launcher = launcher if isinstance(launcher, SpareLauncher) else None
        self.most = most if self.launcher is not None else 0
        self._waiting: dict[str, Path] = {}
        """Each kind's spare, the kind launched last at the end; only the worker touches it."""
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spares")
        self._closing = threading.Event()

    def begin(self, keep: Sequence[Path]) -> None:
        """Remove the spares an earlier serve left, but those started in a folder of `keep`
        (queued clones' run folders)."""
        for spare in list(spares.waiting(self.clones_dir)):
            spares.give_up(spare)
        if self.launcher is not None:
            for line in self.launcher.drop_spares(keep):
                log.info("removed %s, left by an earlier serve", line)
        for hidden in list(spares.given_up(self.clones_dir)):
            spares.forget(hidden)

    def sweep(self, keep: Sequence[Path]) -> None:
        """Remove the containers started ahead in folders that are neither waiting spares nor
        in `keep` (queued clones' run folders): a spare taken by a clone stopped before its
        launch, or by a start that died. On serve's own thread, as launches are: a spare is
        never removed between a launch's look at it and its taking it up."""
        if self.launcher is None:
            return
        try:
            dropped = self.launcher.drop_spares([*spares.waiting(self.clones_dir), *keep])
        except Exception as error:  # noqa: BLE001 - the next sweep tries again
            log.warning("cannot look for spares no clone will take: %s", error)
            return
        for line in dropped:
            log.info("removed %s: no clone will take it", line)

    def resize(self, most: int) -> None:
        """The config's `spares` changed: keep at most `most` from now on, giving up the
        oldest of those waiting beyond it."""
        self.most = most if self.launcher is not None else 0
        if self.launcher is not None:
            self._worker.submit(self._logged, self._trim)

    def _trim(self) -> None:
        while len(self._waiting) > self.most:
            self._drop(self._waiting.pop(next(iter(self._waiting))))

    @property
    def possible(self) -> bool:
        """Whether serve keeps spares (a launcher that can, and `spares` not 0)."""
        return self.most > 0

    def launched(self, kind: str | None, spec: LaunchSpec, at_once: bool = False) -> None:
        """A clone of `kind` was launched with `spec`: have the next one's container wait,
        `delay_s` later (`at_once`: now, for a kind serve only read of)."""
        if self.most == 0 or kind is None:
            return
        if spec.network is not NetworkMode.OPEN:
            return
        when = time.monotonic() + (0.0 if at_once else self.delay_s)
        self._worker.submit(self._logged, self._keep, kind, spec, when)

    def close(self) -> None:
        """Give up every spare still waiting and remove its container."""
        self._closing.set()
        self._worker.submit(self._logged, self._drop_all)
        self._worker.shutdown(wait=True)

    @staticmethod
    def _logged(work: Callable[..., None], *args: object) -> None:
        try:
            work(*args)
        except Exception:
            log.exception("spares: %s failed; clones launch without", work.__name__)

    def _keep(self, kind: str, spec: LaunchSpec, when: float) -> None:
        assert self.launcher is not None
        if self._closing.wait(max(0.0, when - time.monotonic())):
            return
        spare = self._waiting.pop(kind, None)
        if spare is not None and spare.is_dir():  # still waiting: no start took it
            self._waiting[kind] = spare
            return
        while len(self._waiting) >= self.most:
            self._drop(self._waiting.pop(next(iter(self._waiting))))
        folder = spares.make_spare(self.clones_dir, kind)
        ahead = attrs.evolve(
            spec,
            clone_id=folder.name,
            run_folder=folder,
            labels={k: v for k, v in spec.labels.items() if k not in OF_THE_CLONE},
            env={k: v for k, v in spec.env.items() if k not in OF_THE_CLONE},
        )
        try:
            self.launcher.keep_spare(ahead)
        except Exception as error:  # noqa: BLE001 - a spare is a saving: its clones launch anyway
            log.warning("no spare for clones like %s: %s", spec.clone_id, error)
            self._drop(folder)
            return
        self._waiting[kind] = folder

    def _drop(self, spare: Path) -> None:
        assert self.launcher is not None
        hidden = spares.give_up(spare)
        if hidden is None:
            return  # a start took it: that clone's launch takes up its container
        try:
            self.launcher.drop_spare(hidden)
        except Exception as error:  # noqa: BLE001 - the next serve removes it
            log.warning("cannot remove the container of spare %s: %s", spare.name, error)
            return
        spares.forget(hidden)

    def _drop_all(self) -> None:
        while self._waiting:
            self._drop(self._waiting.popitem()[1])
