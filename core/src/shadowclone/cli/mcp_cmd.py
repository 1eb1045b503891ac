"""`shadowclone mcp`: the MCP server over stdio, for the owner's assistant."""

from __future__ import annotations

import click

from shadowclone.cli.app import App

pass_app = click.make_pass_decorator(App, ensure=True)


@click.command()
@pass_app
def mcp(app: App) -> None:
    """Serve start, list, get, send, answer and stop to your assistant over MCP (stdio).

    Your assistant starts this command itself. To add it (see docs/mcp.md):

    \b
      claude mcp add --scope user shadowclone -- shadowclone mcp
      codex mcp add shadowclone -- shadowclone mcp
    """
    from shadowclone.mcp.early import main

    main(app.paths)
