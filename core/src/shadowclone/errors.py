"""The errors a person sees: each carries one line and the exit code the CLI uses.

The CLI and the MCP server turn these into one line (never a traceback); anything else that
escapes is a bug.
"""

from __future__ import annotations

from pathlib import Path


class ShadowcloneError(Exception):
    """Base of every error meant for the owner; `str()` is the one line to show."""

    exit_code = 1


class Refused(ShadowcloneError):
    """A valid request that a rule refuses (admission, state of the clone)."""

    exit_code = 1


class BadInput(ShadowcloneError):
    """Input that cannot be understood: a bad target, an unknown id, a bad option."""

    exit_code = 2


class ConfigError(BadInput):
    """The config file is missing a key, has a wrong type, or is not TOML."""


class NotFound(BadInput):
    """An id that names no clone or question."""


class MalformedFile(ShadowcloneError):
    """A run-folder file that cannot be read as its schema; names the file."""

    exit_code = 2

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


class PluginUnavailable(ShadowcloneError):
    """A plugin that is installed but cannot do this yet, or that failed to load."""

    exit_code = 1
