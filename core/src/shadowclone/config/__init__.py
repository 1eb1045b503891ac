"""The owner's config: schema, host paths, loading and editing.

The names are loaded when first used (PEP 562): a shell completion that needs only the paths
does not pay for the schema and the TOML library."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shadowclone.config.load import init_config, load_config, parse_config, set_value
    from shadowclone.config.paths import HOME_VARIABLE, Paths, default_paths
    from shadowclone.config.schema import Config, GithubConfig, LimitsConfig, ProviderConfig

_WHERE = {
    "init_config": "load",
    "load_config": "load",
    "parse_config": "load",
    "set_value": "load",
    "HOME_VARIABLE": "paths",
    "Paths": "paths",
    "default_paths": "paths",
    "Config": "schema",
    "GithubConfig": "schema",
    "LimitsConfig": "schema",
    "ProviderConfig": "schema",
}

__all__ = [
    "HOME_VARIABLE",
    "Config",
    "GithubConfig",
    "LimitsConfig",
    "Paths",
    "ProviderConfig",
    "default_paths",
    "init_config",
    "load_config",
    "parse_config",
    "set_value",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
