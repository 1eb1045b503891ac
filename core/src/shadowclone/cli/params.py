"""Parameters that complete in the shell: clone ids and installed engines.

Kept light: this module imports only click. The clones index and the plugins are read when a
value is completed or checked, never when `--help` or `--version` runs."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem

if TYPE_CHECKING:
    from shadowclone.config import Paths

COMPLETED_IDS = 200
"""At most this many ids, the newest, are offered for one completion."""


def _paths(ctx: click.Context) -> Paths:
    from shadowclone.cli.app import App
    from shadowclone.config import default_paths

    app = ctx.find_object(App)
    return app.paths if app is not None else default_paths()


def complete_clone_id(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Ids starting with what was typed, newest first; nothing (never an error) on a problem."""
    from shadowclone.errors import ShadowcloneError
    from shadowclone.node.index import CloneIndex

    try:
        ids = CloneIndex(_paths(ctx).clones_dir).with_prefix(incomplete)
    except (OSError, ShadowcloneError):
        return []
    return [CompletionItem(clone_id) for clone_id in reversed(ids[-COMPLETED_IDS:])]


def completed_engines(ctx: click.Context) -> list[str]:
    """The installed engines for a TAB, from `Paths.completion_cache` while no distribution
    was installed or removed and the config is unchanged since it was written (finding them
    loads every plugin: a fifth of a second)."""
    from shadowclone import files

    paths = _paths(ctx)
    key = _installation_key(paths.config_file)
    with contextlib.suppress(OSError, ValueError, TypeError):
        cached = json.loads(paths.completion_cache.read_bytes())
        if cached["key"] == key and all(isinstance(name, str) for name in cached["engines"]):
            return list(cached["engines"])
    names = installed_engines(ctx)
    document = json.dumps({"key": key, "engines": names}).encode()
    # A home this user cannot write: the next TAB asks the plugins again.
    with contextlib.suppress(OSError):
        files.write_atomic(paths.completion_cache, document)
    return names


def _installation_key(config_file: Path) -> list[object]:
    """What the installed engines depend on: shadowclone's version, each folder of the import
    path (installing or removing a distribution changes its folder) and the config (whose
    `plugins.disabled` hides some)."""
    from shadowclone import __version__

    key: list[object] = [__version__]
    for place in (*sys.path, str(config_file)):
        with contextlib.suppress(OSError):
            info = os.stat(place or ".")
            key.append([place, info.st_mtime_ns, info.st_size])
    return key


def installed_engines(ctx: click.Context) -> list[str]:
    """The engines the installed, enabled plugins provide."""
    from shadowclone.config import load_config
    from shadowclone.plugin.manager import load_registry
    from shadowclone.plugin.types import Family

    config, _ = load_config(_paths(ctx))
    return load_registry(config.plugins.disabled).names(Family.ENGINE)


class EngineName(click.ParamType[str]):
    """One of the installed engines; checked when given, not when help is shown."""

    name = "engine"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        text = str(value)
        names = installed_engines(ctx or click.get_current_context())
        if text not in names:
            close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
            guess = f"did you mean {close[0]!r}? " if close else ""
            self.fail(
                f"{text!r} is not an installed engine ({guess}installed: "
                f"{', '.join(names) or 'none'})",
                param,
                ctx,
            )
        return text

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        from shadowclone.errors import ShadowcloneError

        try:
            names = completed_engines(ctx)
        except ShadowcloneError:
            return []
        return [CompletionItem(name) for name in names if name.startswith(incomplete)]


ENGINE = EngineName()
