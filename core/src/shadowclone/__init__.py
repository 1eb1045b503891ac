"""shadowclone: run Claude Code or Codex clones on GitHub issues and pull requests."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("shadowclone")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"
