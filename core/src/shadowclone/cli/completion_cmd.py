"""`shadowclone completion SHELL`: the script that makes the shell complete shadowclone."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

COMPLETE_VARIABLE = "_SHADOWCLONE_COMPLETE"


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish: commands, clone ids, engines.

    \b
    Examples:
      eval "$(shadowclone completion bash)"     # in ~/.bashrc
      eval "$(shadowclone completion zsh)"      # in ~/.zshrc
      shadowclone completion fish > ~/.config/fish/completions/shadowclone.fish
    """
    from shadowclone.cli import cli

    kind = get_completion_class(shell)
    assert kind is not None  # the choice above names only the shells click knows
    click.echo(kind(cli, {}, "shadowclone", COMPLETE_VARIABLE).source())
