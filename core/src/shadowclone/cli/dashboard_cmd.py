"""`shadowclone dashboard`: the local web page."""

from __future__ import annotations

import click

from shadowclone.cli.app import App, pass_app
from shadowclone.config import load_config


@click.command()
@click.option("--host", help="The address to listen on (default: the config's, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), help="The port (default: the config's).")
@pass_app
def dashboard(app: App, host: str | None, port: int | None) -> None:
    """Serve the dashboard: a local web page to follow clones, answer, message and stop them."""
    from shadowclone.dashboard.keys import LOGIN_CODE_S, load_token, login_url, token_file
    from shadowclone.dashboard.server import make_server

    config, paths = load_config(app.paths)
    host = host or config.dashboard.host
    port = port or config.dashboard.port
    token, made = load_token(paths)
    server = make_server(config, paths, host, port, token)
    address = f"http://{host}:{port}"
    # The token is never printed (a terminal's scrollback is no place for it), nor put in a
    # URL: the login link carries a code that logs in once, within minutes, on this server.
    app.out.print(
        f"the dashboard serves {address}"
        + (f"; its token is new, in {token_file(paths)}" if made else "")
        + f"\nlog in: open {login_url(address, token)} (once, within "
        + f"{round(LOGIN_CODE_S / 60)} minutes; later, log in at {address}/login with the token)",
        markup=False,
        highlight=False,
    )
    server.run()
