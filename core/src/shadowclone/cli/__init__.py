"""The `shadowclone` command: a thin layer over the node (R37).

Every error the owner can cause ends in one line on stderr and an exit code: 1 for a refused
operation, 2 for bad input. Nothing prints a traceback for those.
"""

from __future__ import annotations

import sys

import click

from shadowclone import __version__
from shadowclone.cli import (
    clones,
    config_cmd,
    demo,
    image_cmd,
    mcp_cmd,
    plugins_cmd,
    serve_cmd,
    service_cmd,
    setup_cmd,
)
from shadowclone.cli.app import App
from shadowclone.errors import ShadowcloneError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shadowclone")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run Claude Code or Codex clones on your GitHub issues and pull requests."""
    ctx.obj = App()


for command in (
    setup_cmd.setup,
    *clones.COMMANDS,
    config_cmd.config,
    plugins_cmd.plugins,
    serve_cmd.serve,
    mcp_cmd.mcp,
    image_cmd.image,
    service_cmd.service,
    demo.demo,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="shadowclone", standalone_mode=False)
    except ShadowcloneError as error:
        click.echo(f"shadowclone: {error}", err=True)
        return error.exit_code
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        click.echo("shadowclone: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


def entry() -> None:
    sys.exit(main())
