"""shadowclone: run Claude Code or Codex clones on GitHub issues and pull requests."""

__version__ = "0.1.0"
"""The one version of the core and its plugins (the build reads it from here)."""
