"""`shadowclone config`: where things are, what the config says, and a commented template."""

from __future__ import annotations

import click
import tomlkit

from shadowclone.cli.app import App, emit_json, json_option, no_config_line, pass_app
from shadowclone.config import Config, init_config, load_config, set_value
from shadowclone.config.load import config_or_defaults, unstructure


@click.group()
def config() -> None:
    """Show, create or edit the config file."""


@config.command()
@json_option
@pass_app
def path(app: App, as_json: bool) -> None:
    """Print where the config, the secrets file, the clones and the setups are."""
    paths = app.paths
    if paths.config_file.exists():
        _, paths = load_config(app.paths)
    rows = {
        "config": str(paths.config_file),
        "secrets": str(paths.secrets_file),
        "clones": str(paths.clones_dir),
        "setups": str(paths.setup_dir),
    }
    if as_json:
        emit_json(rows)
        return
    for key, value in rows.items():
        app.out.print(f"{key:<8} {value}")


@config.command()
@json_option
@pass_app
def show(app: App, as_json: bool) -> None:
    """Print the config as shadowclone reads it, defaults included."""
    loaded, paths, defaults = config_or_defaults(app.paths)
    if defaults:
        click.echo(no_config_line(paths), err=True)
    data = unstructure(loaded)
    if as_json:
        emit_json(data)
        return
    click.echo(tomlkit.dumps(data), nl=False)


@config.command()
@click.option("--force", is_flag=True, help="Replace an existing config file.")
@json_option
@pass_app
def init(app: App, force: bool, as_json: bool) -> None:
    """Write a commented config file with the defaults."""
    written = init_config(app.paths, force=force)
    missing = _defaults_not_installed(app)
    if as_json:
        emit_json({"wrote": str(written), "not_installed": missing})
        return
    app.out.print(f"wrote {written}")
    for line in missing:
        app.out.print(f"note: {line}")


def _defaults_not_installed(app: App) -> list[str]:
    """The default engine and launcher where no installed plugin provides them, each with the
    distribution to add or the key to change."""
    from shadowclone.errors import PluginUnavailable
    from shadowclone.plugin.manager import load_registry

    config, _ = load_config(app.paths)
    registry = load_registry(config.plugins.disabled)
    missing = []
    for key, ask in (
        ("engine", lambda: registry.engine(config.engine)),
        ("launcher", lambda: registry.launcher(config.launcher)),
    ):
        try:
            ask()
        except PluginUnavailable as error:
            missing.append(f"{key}: {error} (or `shadowclone config set {key} NAME`)")
    return missing


def _names_installed(app: App, key: str, config: Config) -> None:
    """A key that names a plugin's launcher, engine or login must name an installed one (the
    error says which are, and the closest)."""
    from shadowclone.node.engines import engine_and_login
    from shadowclone.plugin.manager import load_registry

    parts = key.split(".")
    if parts == ["launcher"]:
        load_registry(config.plugins.disabled).launcher(config.launcher)
    elif parts[0] == "providers" and len(parts) >= 2 and config.provider(parts[1]) is not None:
        registry = load_registry(config.plugins.disabled)
        engine_and_login(config, app.paths.config_file, lambda: registry, parts[1])


@config.command(name="set")
@click.argument("key")
@click.argument("value")
@json_option
@pass_app
def set_(app: App, key: str, value: str, as_json: bool) -> None:
    """Set KEY (e.g. parallel_clones or providers.claude.login) to VALUE, keeping comments.

    \b
    Examples:
      shadowclone config set parallel_clones 3
      shadowclone config set providers.claude.login '"claude-oauth"'
    """
    set_value(app.paths, key, value, check=lambda config: _names_installed(app, key, config))
    if as_json:
        emit_json({"key": key, "value": value})
        return
    app.out.print(f"set {key} = {value}")
