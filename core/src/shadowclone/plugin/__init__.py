"""Everything a plugin author imports: the `hookimpl` marker, the registrations and
protocols, the errors a plugin raises, and the helpers an engine or a launcher shares (process
trees, one-line summaries, the environment image builder)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pluggy

from shadowclone import __version__ as CORE_VERSION
from shadowclone.errors import BadInput, ConfigError, MalformedFile, PluginUnavailable, Refused
from shadowclone.plugin import contract
from shadowclone.plugin.launcher_parts import (
    DescribedLauncher,
    PhasedLauncher,
    PreparingLauncher,
    RelayingLauncher,
    SpareLauncher,
)
from shadowclone.plugin.spec import PROJECT
from shadowclone.plugin.types import (
    CloneStatus,
    EarlyStart,
    Engine,
    EngineEvent,
    EngineLimits,
    EngineRegistration,
    EngineSession,
    EngineTask,
    EnvironmentRecipe,
    Family,
    FinishedEvent,
    KeepsSessions,
    Launcher,
    LauncherRegistration,
    LauncherSettings,
    LaunchSpec,
    LaunchState,
    NetworkMode,
    Notification,
    Notifier,
    NotifierContext,
    NotifierRegistration,
    NotifyEvent,
    Outcome,
    RelayAccess,
    ReviewContext,
    ReviewResult,
    ReviewStage,
    ReviewStageRegistration,
    Secret,
    SecretProviderRegistration,
    StartsEarly,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)

if TYPE_CHECKING:
    from shadowclone.config import default_paths
    from shadowclone.config.schema import DEFAULT_IMAGE, DEMO_IMAGE
    from shadowclone.environment.compose import Compose
    from shadowclone.environment.compose_services import Service as ComposeService
    from shadowclone.environment.declared import Environment
    from shadowclone.environment.declared import declared as declared_environment
    from shadowclone.environment.declared import image_tag as environment_image_tag
    from shadowclone.environment.devcontainer import READING_PATH as DEVCONTAINER_READING
    from shadowclone.environment.devcontainer import clean_env as devcontainer_env
    from shadowclone.environment.devcontainer import cli_command as devcontainer_cli
    from shadowclone.files import FileLock, write_atomic
    from shadowclone.node.lifecycle import LIFECYCLE_KEYS, PrebuildSpec, feature_commands
    from shadowclone.node.setups import files_in
    from shadowclone.plugin.engine_base import STOP_GRACE_S, ProcessSession, exit_words
    from shadowclone.plugin.manager import (
        ENTRY_POINT_GROUP,
        PluginInfo,
        Provided,
        Registry,
        load_registry,
        make_plugin_manager,
    )
    from shadowclone.plugin.owner import RepositorySetup, launcher_settings, repository_setup
    from shadowclone.plugin.processes import (
        ProcessTree,
        read_stderr,
        spawn_engine,
        until_finished,
    )
    from shadowclone.plugin.summary import arguments_detail, one_line

_LAZY = {
    **dict.fromkeys(
        (
            "ENTRY_POINT_GROUP",
            "PluginInfo",
            "Provided",
            "Registry",
            "load_registry",
            "make_plugin_manager",
        ),
        "shadowclone.plugin.manager",
    ),
    **dict.fromkeys(
        ("ProcessTree", "read_stderr", "spawn_engine", "until_finished"),
        "shadowclone.plugin.processes",
    ),
    **dict.fromkeys(("arguments_detail", "one_line"), "shadowclone.plugin.summary"),
    **dict.fromkeys(
        ("STOP_GRACE_S", "ProcessSession", "exit_words"), "shadowclone.plugin.engine_base"
    ),
    **dict.fromkeys(("DEFAULT_IMAGE", "DEMO_IMAGE"), "shadowclone.config.schema"),
    "Compose": "shadowclone.environment.compose",
    "ComposeService": "shadowclone.environment.compose_services:Service",
    "Environment": "shadowclone.environment.declared",
    **dict.fromkeys(
        ("LIFECYCLE_KEYS", "PrebuildSpec", "feature_commands"), "shadowclone.node.lifecycle"
    ),
    "declared_environment": "shadowclone.environment.declared:declared",
    "environment_image_tag": "shadowclone.environment.declared:image_tag",
    "files_in": "shadowclone.node.setups",
    "default_paths": "shadowclone.config",
    "devcontainer_cli": "shadowclone.environment.devcontainer:cli_command",
    "devcontainer_env": "shadowclone.environment.devcontainer:clean_env",
    "DEVCONTAINER_READING": "shadowclone.environment.devcontainer:READING_PATH",
    "write_atomic": "shadowclone.files",
    "FileLock": "shadowclone.files",
    **dict.fromkeys(
        ("RepositorySetup", "launcher_settings", "repository_setup"), "shadowclone.plugin.owner"
    ),
}
"""Names imported on first use (`module` or `module:attribute`): the loader reads entry points
(importlib.metadata), the process helpers import psutil, the owner's settings the config;
commands that only read run folders need none of them."""


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is not None:
        module, _, attribute = home.partition(":")
        return getattr(importlib.import_module(module), attribute or name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin's hook functions: `@hookimpl def shadowclone_engines(): ...`."""

__all__ = [
    "CORE_VERSION",
    "DEFAULT_IMAGE",
    "DEMO_IMAGE",
    "DEVCONTAINER_READING",
    "ENTRY_POINT_GROUP",
    "LIFECYCLE_KEYS",
    "STOP_GRACE_S",
    "BadInput",
    "CloneStatus",
    "Compose",
    "ComposeService",
    "ConfigError",
    "DescribedLauncher",
    "EarlyStart",
    "Engine",
    "EngineEvent",
    "EngineLimits",
    "EngineRegistration",
    "EngineSession",
    "EngineTask",
    "Environment",
    "EnvironmentRecipe",
    "Family",
    "FileLock",
    "FinishedEvent",
    "KeepsSessions",
    "LaunchSpec",
    "LaunchState",
    "Launcher",
    "LauncherRegistration",
    "LauncherSettings",
    "MalformedFile",
    "NetworkMode",
    "Notification",
    "Notifier",
    "NotifierContext",
    "NotifierRegistration",
    "NotifyEvent",
    "Outcome",
    "PhasedLauncher",
    "PluginInfo",
    "PluginUnavailable",
    "PrebuildSpec",
    "PreparingLauncher",
    "ProcessSession",
    "ProcessTree",
    "Provided",
    "Refused",
    "Registry",
    "RelayAccess",
    "RelayingLauncher",
    "RepositorySetup",
    "ReviewContext",
    "ReviewResult",
    "ReviewStage",
    "ReviewStageRegistration",
    "Secret",
    "SecretProviderRegistration",
    "SpareLauncher",
    "StartsEarly",
    "TextEvent",
    "ToolUseEvent",
    "TurnEndedEvent",
    "UsageEvent",
    "arguments_detail",
    "contract",
    "declared_environment",
    "default_paths",
    "devcontainer_cli",
    "devcontainer_env",
    "environment_image_tag",
    "exit_words",
    "feature_commands",
    "files_in",
    "hookimpl",
    "launcher_settings",
    "load_registry",
    "make_plugin_manager",
    "one_line",
    "read_stderr",
    "repository_setup",
    "spawn_engine",
    "until_finished",
    "write_atomic",
]
