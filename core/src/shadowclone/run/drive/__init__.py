"""Driving the engine inside the clone: `supervise_engine` (the spec's superviseEngine)."""

from __future__ import annotations

from shadowclone.run.drive.supervise import EngineResult, supervise_engine

__all__ = ["EngineResult", "supervise_engine"]
