"""Everything a plugin author imports: the `hookimpl` marker, registrations and protocols."""

from __future__ import annotations

import pluggy

from shadowclone.plugin.manager import (
    ENTRY_POINT_GROUP,
    PluginInfo,
    Provided,
    Registry,
    load_registry,
    make_plugin_manager,
)
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
    Family,
    FinishedEvent,
    Launcher,
    LauncherRegistration,
    LaunchSpec,
    NetworkMode,
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
    "Family",
    "FinishedEvent",
    "LaunchSpec",
    "Launcher",
    "LauncherRegistration",
    "NetworkMode",
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
