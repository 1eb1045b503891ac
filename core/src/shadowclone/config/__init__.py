"""The owner's config: schema, host paths, loading and editing."""

from __future__ import annotations

from shadowclone.config.load import init_config, load_config, parse_config, set_value
from shadowclone.config.paths import HOME_VARIABLE, Paths, default_paths
from shadowclone.config.schema import Config, GithubConfig, LimitsConfig, ProviderConfig

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
