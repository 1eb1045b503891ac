"""`shadowclone service`: run `serve` as a systemd user unit or a launchd agent."""

from __future__ import annotations

import click

from shadowclone.cli.app import App, emit_json, json_option, pass_app
from shadowclone.serve.service import Service, ServiceResult


def _show(app: App, result: ServiceResult, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "manager": result.manager,
                "path": str(result.path),
                "installed": result.installed,
                "running": result.running,
                "summary": result.summary,
                "commands": [list(c.argv) for c in result.commands],
                "status": result.status,
            }
        )
        return
    app.out.print(result.summary)


@click.group()
def service() -> None:
    """Install, remove or inspect the service that keeps `shadowclone serve` running."""


@service.command()
@json_option
@pass_app
def install(app: App, as_json: bool) -> None:
    """Write and enable the unit (Linux) or agent (macOS) that runs `serve`."""
    _show(app, Service().install(), as_json)


@service.command()
@json_option
@pass_app
def uninstall(app: App, as_json: bool) -> None:
    """Stop and remove the service; running clones are left alone."""
    _show(app, Service().uninstall(), as_json)


@service.command()
@json_option
@pass_app
def status(app: App, as_json: bool) -> int:
    """Say whether the service is installed and running; exit 3 when serve is not running.

    \b
    Example:
      shadowclone service status || shadowclone service install
    """
    result = Service().status()
    _show(app, result, as_json)
    return 0 if result.running else 3
