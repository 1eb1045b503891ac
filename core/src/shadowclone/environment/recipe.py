"""A repository's environment as a launcher gets it: where setup kept its files, and how the
owner's config says to build its image."""

from __future__ import annotations

from pathlib import Path

import attrs

from shadowclone.config import Config, Paths
from shadowclone.node.setups import environment_dir


@attrs.frozen
class EnvironmentRecipe:
    """A repository's declared environment, for the launcher to make its clone's image of:
    the files setup kept (a devcontainer.json or environment.toml, and what they name) in
    `folder`, on the clone image `LaunchSpec.image`."""

    repo: str
    folder: Path
    network: str | None = "host"
    """The network of the build's steps (None: Docker's default)."""
    ca_certs: tuple[Path, ...] = ()
    """Certificate authorities the build trusts besides Debian's."""


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
