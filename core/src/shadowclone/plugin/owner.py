"""What a plugin's own commands and its environment images need of the core: the owner's
settings and a repository's setup (the plugin API, shadowclone.plugin, hands them out with the
environment a repository's kept files declare).

A launcher's `prepare` gets an `EnvironmentRecipe`; `declared_environment(files_in(folder))`
reads it, and `environment_image_tag` names the image made from it, once per change.
"""

from __future__ import annotations

import attrs

from shadowclone.config import Paths, default_paths, load_config
from shadowclone.environment.recipe import recipe_for
from shadowclone.errors import Refused
from shadowclone.node.setups import read_setup
from shadowclone.node.target import parse_repo
from shadowclone.plugin.types import EnvironmentRecipe, LauncherSettings


def launcher_settings(paths: Paths | None = None, name: str | None = None) -> LauncherSettings:
    """The settings serve gives the configured launcher (or the launcher `name`, whose
    `[launchers.NAME]` table they then hold), from the owner's config."""
    config, found = load_config(paths or default_paths())
    if name is not None:
        return LauncherSettings(found.clones_dir, config.image, config.launchers.get(name, {}))
    return LauncherSettings.of(config, found.clones_dir, config.image)


@attrs.frozen
class RepositorySetup:
    """A repository set up on this machine, as its clones will run."""

    repo: str
    """As GitHub spells it."""
    clone_image: str
    environment: EnvironmentRecipe | None
    """None: it declares no environment."""


def repository_setup(repo_text: str, paths: Paths | None = None) -> RepositorySetup:
    """`owner/repo`'s setup; Refused when it is not set up here."""
    owner, name = parse_repo(repo_text)
    repo = f"{owner}/{name}"
    config, found = load_config(paths or default_paths())
    record = read_setup(found, repo)
    if record is None:
        raise Refused(f"{repo} is not set up here: run `shadowclone setup {repo}` first")
    recipe = recipe_for(config, found, record.repo) if record.environment else None
    return RepositorySetup(record.repo, record.image or config.image, recipe)
