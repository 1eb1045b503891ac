"""Everything a plugin author imports: the `hookimpl` marker, registrations and protocols."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pluggy

from shadowclone.plugin.spec import PROJECT
from shadowclone.plugin.types import (
    CloneState,
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
    LaunchSpec,
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
    from shadowclone.plugin.manager import (
        ENTRY_POINT_GROUP,
        PluginInfo,
        Provided,
        Registry,
        load_registry,
        make_plugin_manager,
    )

_FROM_MANAGER = frozenset(
    {
        "ENTRY_POINT_GROUP",
        "PluginInfo",
        "Provided",
        "Registry",
        "load_registry",
        "make_plugin_manager",
    }
)


def __getattr__(name: str) -> Any:
    """The loader's names, imported on first use: it reads entry points (importlib.metadata),
    which commands that only read run folders never need."""
    if name in _FROM_MANAGER:
        return getattr(importlib.import_module("shadowclone.plugin.manager"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin's hook functions: `@hookimpl def shadowclone_engines(): ...`."""

__all__ = [
    "ENTRY_POINT_GROUP",
    "CloneState",
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
    "Launcher",
    "LauncherRegistration",
    "NetworkMode",
    "Notification",
    "Notifier",
    "NotifierContext",
    "NotifierRegistration",
    "NotifyEvent",
    "Outcome",
    "PluginInfo",
    "Provided",
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
    "hookimpl",
    "load_registry",
    "make_plugin_manager",
]
