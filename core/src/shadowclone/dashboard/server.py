"""Running the dashboard: on its own (`shadowclone dashboard`) or on a thread of serve's."""

from __future__ import annotations

import logging
import threading

import uvicorn

from shadowclone.config import Config, Paths
from shadowclone.dashboard.app import build_app
from shadowclone.dashboard.keys import load_token
from shadowclone.plugin.node import LocalNode

log = logging.getLogger(__name__)


def make_server(
    config: Config,
    paths: Paths,
    host: str,
    port: int,
    token: str | None = None,
    node: LocalNode | None = None,
) -> uvicorn.Server:
    """The dashboard's server; `token`: the one already read (else it is read now); `node`:
    the node it serves (else one of `config`)."""
    token = token if token is not None else load_token(paths)[0]
    app = build_app(node or LocalNode(config, paths), token, origin=config.dashboard.url, host=host)
    settings = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
    )
    return uvicorn.Server(settings)


class DashboardThread:
    """The dashboard on a thread of its own (serve's, with `[dashboard] serve = true`)."""

    def __init__(self, config: Config, paths: Paths) -> None:
        self.config = config
        self.node = LocalNode(config, paths)
        """What its pages read and do: serve gives it each new config (`node.config`)."""
        self.server = make_server(
            config, paths, config.dashboard.host, config.dashboard.port, node=self.node
        )
        self.thread = threading.Thread(target=self._run, name="dashboard", daemon=True)

    def _run(self) -> None:
        try:
            self.server.run()
        except (OSError, SystemExit) as error:
            log.error("the dashboard could not run: %s", error)

    def start(self) -> None:
        self.thread.start()
        log.info("the dashboard serves %s:%d", self.server.config.host, self.server.config.port)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
