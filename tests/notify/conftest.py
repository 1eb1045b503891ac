"""The serve fixtures: notifications are told by serve."""

from tests.serve.conftest import ready, scripts

__all__ = ["ready", "scripts"]
