"""The `shadowclone` command: a thin layer over the node.

Every error the owner can cause ends in one line on stderr and an exit code: 1 for a refused
operation, 2 for bad input. Nothing prints a traceback for those.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import TYPE_CHECKING

import click

from shadowclone import __version__
from shadowclone.errors import PluginUnavailable, ShadowcloneError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from click.shell_completion import CompletionItem

COMMANDS: dict[str, tuple[str, str, str]] = {
    "setup": (
        "setup_cmd",
        "setup",
        "Prepare a repository for clones on this machine; changes nothing on GitHub.",
    ),
    "start": (
        "clones",
        "start",
        "Queue a clone on TARGET: owner/repo#N, or an issue or pull request URL.",
    ),
    "list": ("clones", "list_", "List active clones and the most recent others."),
    "get": (
        "clones",
        "get",
        "Show one clone: state, target, question, pull request, last progress lines.",
    ),
    "send": ("clones", "send", "Send a message to a running or queued clone."),
    "answer": (
        "clones",
        "answer",
        "Answer a clone's open question with one of its options (or its number).",
    ),
    "stop": (
        "clones",
        "stop",
        "Stop a clone: a queued one never starts, a running one is stopped and its work saved.",
    ),
    "resume": (
        "clones",
        "resume",
        "Resume a clone scheduled for its login's usage limit now, not at the reset.",
    ),
    "rm": (
        "clones",
        "rm",
        "Remove ended clones: their run folders and workspaces; a running clone is refused.",
    ),
    "prune": (
        "clones",
        "prune",
        "Remove every clone that ended more than --older-than ago (active clones stay), and "
        "with --caches the repositories' caches, which the next clone of each makes again.",
    ),
    "status": (
        "status_cmd",
        "status",
        "Say whether clones can run here: serve, the service, the launcher, the queue, today's "
        "count, the setups and the secrets file; exit 1 when something keeps clones from "
        "starting.",
    ),
    "config": ("config_cmd", "config", "Show, create or edit the config file."),
    "plugins": (
        "plugins_cmd",
        "plugins",
        "List every plugin: name, family, distribution, version and status.",
    ),
    "serve": (
        "serve_cmd",
        "serve",
        "Start queued clones, deliver messages and answers, and record how each clone ends.",
    ),
    "dashboard": (
        "dashboard_cmd",
        "dashboard",
        "Serve the dashboard: a local web page to follow clones, answer, message and stop them.",
    ),
    "mcp": (
        "mcp_cmd",
        "mcp",
        "Serve start, list, get, send, answer and stop to your assistant over MCP (stdio).",
    ),
    "service": (
        "service_cmd",
        "service",
        "Install, remove or inspect the service that keeps `shadowclone serve` running.",
    ),
    "completion": (
        "completion_cmd",
        "completion",
        "Print the shell completion script for bash, zsh or fish: commands, clone ids, engines.",
    ),
}
"""Each command: its module in this package, its object there, and its whole one-line summary
as `--help` lists it (a test keeps it equal to the command's own). A command's module, and what it
imports (the GitHub client, the MCP SDK, rich...), is imported only when that command runs."""

KNOWN_PLUGIN_COMMANDS = {
    "demo": (
        "shadowclone-testing",
        "the fake GitHub, the fake launcher and the scripted engine",
    ),
}
"""Commands a distribution of the project adds, by name: its name and what it holds, so that
asking for one that is not installed says what to add instead of `No such command`."""

COMMANDS_GROUP = "shadowclone.commands"
"""The entry-point group of plugins' commands: `NAME = "module:command"`, a click command.
Entry points are read only for a name that is not built in, and for `--help`."""


@functools.cache
def plugin_commands() -> dict[str, list[EntryPoint]]:
    """The commands plugins add, by name, with every entry point that claims each; a built-in
    name is never taken. Read once per process: the help, the usage line and the command's
    lookup all ask."""
    from importlib.metadata import entry_points

    found: dict[str, list[EntryPoint]] = {}
    for entry in entry_points(group=COMMANDS_GROUP):
        claims = found.setdefault(entry.name, [])
        if entry.name not in COMMANDS and all(
            (_owner(other), other.value) != (_owner(entry), entry.value) for other in claims
        ):
            claims.append(entry)
    return {name: claims for name, claims in found.items() if claims}


def _owner(entry: EntryPoint) -> str:
    return f"{entry.dist.name} {entry.dist.version}" if entry.dist else "a plugin"


def load_plugin_command(name: str, claims: list[EntryPoint]) -> click.Command:
    """The click command a plugin adds as `name`, or PluginUnavailable saying whose it is and
    what is wrong (two plugins claim it, it does not import, it is not a click command)."""
    if len(claims) > 1:
        owners = " and ".join(sorted(_owner(entry) for entry in claims))
        raise PluginUnavailable(f"the command {name} is claimed by {owners}: uninstall one")
    (entry,) = claims
    try:
        command = entry.load()
    except Exception as error:  # noqa: BLE001 - whatever a plugin raises on import
        raise PluginUnavailable(
            f"the command {name} of {_owner(entry)} cannot load: {error!r}"
        ) from None
    if not isinstance(command, click.Command):
        raise PluginUnavailable(
            f"the command {name} of {_owner(entry)} is {type(command).__name__}, "
            "not a click command"
        )
    return command


class LazyGroup(click.Group):
    """A group that imports a command's module only when the command is asked for."""

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """The commands by name and summary, without importing any of them (click's own
        imports each command that matches, a third of a second at a TAB), then the options."""
        from click.shell_completion import CompletionItem

        items = [
            CompletionItem(name, help=COMMANDS[name][2] if name in COMMANDS else None)
            for name in self.list_commands(ctx)
            if name.startswith(incomplete)
        ]
        return items + click.Command.shell_complete(self, ctx, incomplete)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, with the closest command named for a mistyped one."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as error:
            name = args[0] if args else ""
            if not name or self.get_command(ctx, name) is not None:
                raise
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            if not close:
                raise
            raise click.UsageError(
                f"No such command {name!r}. Did you mean {close[0]!r}?", ctx
            ) from error

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *plugin_commands()])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            claims = plugin_commands().get(cmd_name)
            if claims is None and cmd_name in KNOWN_PLUGIN_COMMANDS:
                distribution, holds = KNOWN_PLUGIN_COMMANDS[cmd_name]
                raise PluginUnavailable(
                    f"the command {cmd_name} needs the {distribution} distribution ({holds}): "
                    f"add it with `uv tool install shadowclone --with {distribution}` or "
                    f"`pipx inject shadowclone {distribution}`"
                )
            return None if claims is None else load_plugin_command(cmd_name, claims)
        module, attribute, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in COMMANDS]
        for name, claims in plugin_commands().items():
            try:
                summary = load_plugin_command(name, claims).get_short_help_str(limit=300)
            except PluginUnavailable as error:
                summary = f"(unavailable: {error})"
            rows.append((name, summary))
        rows.sort()
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shadowclone")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run Claude Code or Codex clones on your GitHub issues and pull requests.

    \b
    Examples:
      shadowclone setup you/app
      shadowclone start you/app#12 -m "keep the public API"
      shadowclone get 261202-120301-k3fa --follow
      shadowclone answer 261202-120301-k3fa q1 postgres

    Each command has its own --help.
    """
    from shadowclone.cli.app import App

    ctx.obj = App()


def main(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="shadowclone", standalone_mode=False)
    except ShadowcloneError as error:
        click.echo(f"shadowclone: {error}", err=True)
        return error.exit_code
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.exceptions.NoArgsIsHelpError as error:
        error.show()  # a group called bare: its help is what was asked for
        return error.exit_code
    except click.UsageError as error:
        click.echo(usage_line(error), err=True)
        return error.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        click.echo("shadowclone: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


def usage_line(error: click.UsageError) -> str:
    """A usage error as every other error is shown: one line, naming the command, what was
    wrong and what the command expects (click's own is three lines: Usage, Try, Error)."""
    message = " ".join(error.format_message().split())
    ctx = error.ctx
    if ctx is None:
        return f"shadowclone: {message}"
    if isinstance(ctx.command, click.Group) and ctx.invoked_subcommand is None:
        names = ctx.command.list_commands(ctx)
        expected = "a command: " + ", ".join(names)
    else:
        pieces = ctx.command.collect_usage_pieces(ctx)
        expected = f"{ctx.command_path} {' '.join(pieces)}".strip()
    message = (message[:1].lower() + message[1:]).rstrip(".")
    return f"{ctx.command_path}: {message}; expected: {expected} (see --help)"


def entry() -> None:
    sys.exit(main())
