"""`[retention]` in serve: old clones removed on a thread of its own, so deleting workspaces
never holds up clones."""

from __future__ import annotations

import logging
import threading

from shadowclone.serve.clones import Current

log = logging.getLogger(__name__)


class Retention:
    """Prunes at start, every `every_s`, and at once when woken (a new `older_than`)."""

    def __init__(self, current: Current, every_s: float) -> None:
        self.current = current
        self.every_s = every_s
        self.wake = threading.Event()

    def start(self, stop_event: threading.Event) -> None:
        threading.Thread(target=self.run, args=(stop_event,), name="retention", daemon=True).start()

    def run(self, stop_event: threading.Event) -> None:
        from shadowclone.config.durations import parse_duration
        from shadowclone.plugin.node import LocalNode

        while not stop_event.is_set():
            config, paths = self.current.config, self.current.paths
            if config.retention.older_than is not None:
                try:
                    older_than = parse_duration(config.retention.older_than)
                    for gone in LocalNode(config, paths).prune(older_than):
                        log.info(
                            "retention: removed clone %s (%s, %d bytes)",
                            gone.id,
                            gone.state,
                            gone.bytes,
                        )
                except Exception:
                    log.exception("retention: pruning failed; trying again later")
            self.wake.wait(self.every_s)
            self.wake.clear()
