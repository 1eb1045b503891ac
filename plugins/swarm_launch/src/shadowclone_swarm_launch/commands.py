"""`shadowclone swarm`: the swarm launcher's commands, found through the entry-point group
`shadowclone.commands`."""

from __future__ import annotations

import sys

import click
from shadowclone.plugin import BadInput, ConfigError, PluginUnavailable, Refused


@click.group()
def swarm() -> None:
    """Clones on a Docker Swarm of your machines (`launcher = "swarm"`)."""


@swarm.command("check")
def check() -> None:
    """Whether the swarm of [launchers.swarm] can run clones: the manager, each node, the
    registry; what is missing, and what to do. Exits 1 if something is."""
    from shadowclone.plugin import launcher_settings

    from shadowclone_swarm_launch.launcher import SwarmLauncher
    from shadowclone_swarm_launch.settings import SwarmSettings

    try:
        settings = launcher_settings(name="swarm")
        launcher = SwarmLauncher(
            settings.clones_dir, settings.image, settings=SwarmSettings.read(settings.options)
        )
    except (ConfigError, BadInput) as error:
        click.echo(f"shadowclone: {error}", err=True)
        sys.exit(2)
    lines: list[tuple[str, bool, str]] = []
    try:
        launcher.check()
        lines.append(("manager", True, launcher.settings.manager or "this machine's Docker"))
    except (PluginUnavailable, Refused) as error:
        lines.append(("manager", False, str(error)))
    if lines[0][1]:
        lines += launcher.describe()
        lines.append(("this machine", True, f"nodes reach it at {launcher.host_address()}"))
    for name, fine, detail in lines:
        click.echo(f"{'ok' if fine else 'NO':<4} {name:<20} {detail}")
    sys.exit(0 if all(fine for _, fine, _ in lines) else 1)
