"""The clone's GitHub: the calls it makes (client.py), what they answer (models.py), and how
they travel (wire.py)."""

from __future__ import annotations

from shadowclone.run.github import models
from shadowclone.run.github.client import GithubClient
from shadowclone.run.github.conversation import THREADS_QUERY
from shadowclone.run.github.models import *  # noqa: F403  (every value object, as models.__all__)
from shadowclone.run.github.wire import GHOST, Waited

__all__ = ["GHOST", "THREADS_QUERY", "GithubClient", "Waited"]
__all__ += models.__all__
