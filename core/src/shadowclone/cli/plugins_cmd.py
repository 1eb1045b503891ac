"""`shadowclone plugins`: what is installed, who provides it, and what failed to load."""

from __future__ import annotations

import click
from rich.table import Table

from shadowclone.cli.app import App, emit_json, json_option, pass_app
from shadowclone.config import load_config
from shadowclone.errors import ConfigError
from shadowclone.plugin import load_registry


@click.command()
@json_option
@pass_app
def plugins(app: App, as_json: bool) -> None:
    """List every plugin: name, family, distribution, version and status."""
    try:
        config, _ = load_config(app.paths)
        disabled: list[str] = config.plugins.disabled
    except ConfigError:
        disabled = []  # listing plugins must work before there is a config
    registry = load_registry(disabled)
    rows = [
        {
            "name": p.name,
            "family": str(p.family),
            "summary": p.summary,
            "distribution": p.plugin.distribution,
            "version": p.plugin.version,
            "status": p.status,
            "reason": p.reason,
        }
        for p in registry.provided
    ]
    providing = {p.plugin.name for p in registry.provided}
    rows.extend(
        {
            "name": info.name,
            "family": "-",
            "summary": "",
            "distribution": info.distribution,
            "version": info.version,
            "status": info.status,
            "reason": info.reason,
        }
        for info in registry.plugins
        if info.name not in providing and info.status != "active"
    )
    if as_json:
        emit_json(rows)
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("NAME", "FAMILY", "DISTRIBUTION", "VERSION", "STATUS"):
        table.add_column(column, no_wrap=True)
    for row in rows:
        status = row["status"] + (f": {row['reason']}" if row["reason"] else "")
        table.add_row(row["name"], row["family"], row["distribution"], row["version"], status)
    app.out.print(table)
