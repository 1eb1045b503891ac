"""`shadowclone mcp`: the MCP server over stdio, for the owner's assistant (R38)."""

from __future__ import annotations

import click

from shadowclone.cli.app import App

pass_app = click.make_pass_decorator(App, ensure=True)


@click.command()
@pass_app
def mcp(app: App) -> None:
    """Serve start, list, get, send, answer and stop to your assistant over MCP (stdio).

    Your assistant runs this command itself; for Claude Code:
    claude mcp add shadowclone -- shadowclone mcp
    """
    from shadowclone.mcp.server import main

    main(app.paths)
