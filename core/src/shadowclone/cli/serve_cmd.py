"""`shadowclone serve`: run the clones of this machine in the foreground."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

import click

from shadowclone.cli.app import App
from shadowclone.serve.loop import ServeSettings, serve_clones

pass_app = click.make_pass_decorator(App, ensure=True)
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


@click.command()
@click.option(
    "--stop-grace",
    type=click.FloatRange(min=0),
    default=ServeSettings().stop_grace_s,
    show_default=True,
    help="Seconds a stopped clone has to save its work before it is made to end.",
)
@click.option(
    "--log-level",
    type=click.Choice(list(LEVELS), case_sensitive=False),
    default="info",
    show_default=True,
    help="What serve logs to stderr (serve.log keeps info and above, or debug with it).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too: --log-level debug.")
@pass_app
def serve(app: App, stop_grace: float, log_level: str, verbose: bool) -> None:
    """Start queued clones, deliver messages and answers, and record how each clone ends.

    Runs until SIGTERM or Ctrl-C; clones keep running and the next serve takes them up. Logs
    to stderr and to serve.log in the clones folder. Follows the config file as it changes;
    one that does not load leaves the last good config in force.

    \b
    Examples:
      shadowclone serve
      shadowclone serve -v
      shadowclone service install    # keep it running, started at login
    """
    from shadowclone.plugin.node import LocalNode
    from shadowclone.serve.following import ConfigFollower

    follower = ConfigFollower.load(app.paths)  # serve follows the file from what it read
    node = LocalNode(follower.config, follower.paths)
    level = logging.DEBUG if verbose else LEVELS[log_level.lower()]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.setLevel(level)
    package = logging.getLogger("shadowclone")
    previous_level = package.level
    if level < logging.INFO:
        package.setLevel(level)
    package.addHandler(handler)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        serve_clones(
            node.config,
            node.paths,
            registry=node.registry,
            stop_event=stop,
            settings=ServeSettings(stop_grace_s=stop_grace),
            follower=follower,
        )
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        package.removeHandler(handler)
        package.setLevel(previous_level)
