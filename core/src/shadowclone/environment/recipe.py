"""A repository's environment as a launcher gets it: where setup kept its files, and how the
owner's config says to build its image."""

from __future__ import annotations

from pathlib import Path

from shadowclone.config import Config, Paths
from shadowclone.node.setups import environment_dir
from shadowclone.plugin.types import EnvironmentRecipe


def recipe_for(config: Config, paths: Paths, repo: str) -> EnvironmentRecipe:
    """What a launcher needs to make `repo`'s environment image, as the config says to build
    it."""
    network = config.environment.network
    return EnvironmentRecipe(
        repo=repo,
        folder=environment_dir(paths, repo),
        network=None if network == "default" else network,
        ca_certs=tuple(Path(cert).expanduser() for cert in config.environment.ca_certs),
    )
