"""The dashboard serve runs with `[dashboard] serve = true`, kept apart from serve's loop,
which only tells it of each new config."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from shadowclone.config import Config, Paths

if TYPE_CHECKING:
    from shadowclone.dashboard.server import DashboardThread


class ServedDashboard:
    """The dashboard serve runs with `[dashboard] serve = true`, following the config: started,
    stopped or moved as `[dashboard]` changes (on a thread of its own, not to hold serve's
    loop), and otherwise given each new config in place."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: DashboardThread | None = None
        self._closed = False

    def follow(self, config: Config, paths: Paths) -> None:
        from shadowclone.dashboard.server import DashboardThread

        with self._lock:
            if self._closed:
                return
            running = self._thread
            if running is not None and running.config.dashboard == config.dashboard:
                running.node.config = config
                return
            if running is not None:
                running.stop()
                self._thread = None
            if config.dashboard.serve:
                self._thread = DashboardThread(config, paths)
                self._thread.start()

    def follow_later(self, config: Config, paths: Paths) -> None:
        threading.Thread(
            target=self.follow, args=(config, paths), name="dashboard config", daemon=True
        ).start()

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            if self._thread is not None:
                self._thread.stop()
                self._thread = None
