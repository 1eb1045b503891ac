"""Everything a plugin author imports: the `hookimpl` marker, the registrations and
protocols, the errors a plugin raises, and the helpers an engine or a launcher shares (process
trees, one-line summaries, the environment image builder)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pluggy

from shadowclone.errors import BadInput, MalformedFile, PluginUnavailable, Refused
from shadowclone.plugin import contract
from shadowclone.plugin.spec import PROJECT
from shadowclone.plugin.types import (
    CloneStatus,
    Engine,
    EngineEvent,
    EngineLimits,
    EngineRegistration,
    EngineSession,
    EngineTask,
    EnvironmentRecipe,
    Family,
    FinishedEvent,
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
    ReviewContext,
    ReviewResult,
    ReviewStage,
    ReviewStageRegistration,
    Secret,
    SecretProviderRegistration,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)

if TYPE_CHECKING:
    from shadowclone.environment.build import prepare_image
    from shadowclone.plugin.engine_base import STOP_GRACE_S, ProcessSession, exit_words
    from shadowclone.plugin.manager import (
        ENTRY_POINT_GROUP,
        PluginInfo,
        Provided,
        Registry,
        load_registry,
        make_plugin_manager,
    )
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
    "prepare_image": "shadowclone.environment.build",
}
"""Names imported on first use: the loader reads entry points (importlib.metadata), the
process helpers import psutil, the image builder the config; commands that only read run
folders need none of them."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin's hook functions: `@hookimpl def shadowclone_engines(): ...`."""

__all__ = [
    "ENTRY_POINT_GROUP",
    "STOP_GRACE_S",
    "BadInput",
    "CloneStatus",
    "Engine",
    "EngineEvent",
    "EngineLimits",
    "EngineRegistration",
    "EngineSession",
    "EngineTask",
    "EnvironmentRecipe",
    "Family",
    "FinishedEvent",
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
    "PluginInfo",
    "PluginUnavailable",
    "ProcessSession",
    "ProcessTree",
    "Provided",
    "Refused",
    "Registry",
    "ReviewContext",
    "ReviewResult",
    "ReviewStage",
    "ReviewStageRegistration",
    "Secret",
    "SecretProviderRegistration",
    "TextEvent",
    "ToolUseEvent",
    "TurnEndedEvent",
    "UsageEvent",
    "arguments_detail",
    "contract",
    "exit_words",
    "hookimpl",
    "load_registry",
    "make_plugin_manager",
    "one_line",
    "prepare_image",
    "read_stderr",
    "spawn_engine",
    "until_finished",
]
