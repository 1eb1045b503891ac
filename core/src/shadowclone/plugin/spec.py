"""The hookspecs: one collecting hook per plugin family.

Every hook takes no arguments and returns an iterable of registration objects from
`shadowclone.plugin.types`. The core picks what to use by name from the config, so no hook is
`firstresult` and no plugin can shadow another by load order.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from shadowclone.plugin.types import (
    EngineRegistration,
    LauncherRegistration,
    NotifierRegistration,
    ReviewStageRegistration,
    SecretProviderRegistration,
)

PROJECT = "shadowclone"
hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def shadowclone_engines() -> Iterable[EngineRegistration]:
    """Offer engines: programs that do a clone's work (Claude Code, Codex...).

    :returns: the engines this plugin provides, each an `EngineRegistration` whose `factory`
        builds an `Engine`. Its `logins` name the secret providers it can use. An engine
        started on a task with `project_settings=False` loads nothing of the workspace's own
        configuration that can run a command (hooks, MCP servers, plugins, skills).
    """
    return ()  # pluggy never runs a spec body


@hookspec
def shadowclone_launchers() -> Iterable[LauncherRegistration]:
    """Offer launchers: places where clones run (Docker, a local process...).

    :returns: the launchers this plugin provides, each a `LauncherRegistration` whose `factory`
        builds a `Launcher`. The config's `launcher` key picks one by name.
    """
    return ()  # pluggy never runs a spec body


@hookspec
def shadowclone_review_stages() -> Iterable[ReviewStageRegistration]:
    """Offer review stages: checks that run inside the clone after the engine, by `order`.

    :returns: the stages this plugin provides, each a `ReviewStageRegistration`. A stage with
        `runs_code=True` runs only on the owner's own work in the repository.
    """
    return ()  # pluggy never runs a spec body


@hookspec
def shadowclone_secret_providers() -> Iterable[SecretProviderRegistration]:
    """Offer secret providers: logins and tokens the owner pastes into the secrets file.

    :returns: the providers this plugin offers, each a `SecretProviderRegistration` naming its
        keys in the secrets file, how each reaches the engine, and its limits.
    """
    return ()  # pluggy never runs a spec body


@hookspec
def shadowclone_notifiers() -> Iterable[NotifierRegistration]:
    """Offer notifiers: ways to tell the owner that a clone asks, pauses, waits or ends.

    :returns: the notifiers this plugin provides, each a `NotifierRegistration` whose
        `factory` builds a `Notifier` from its `[notify.NAME]` settings. The config's
        `[notify] use` picks them by name.
    """
    return ()  # pluggy never runs a spec body
