"""The clone's GitHub: the calls it makes (client.py), what they answer (models.py), and how
they travel (wire.py)."""

from __future__ import annotations

from shadowclone.run.github.client import THREADS_QUERY, GithubClient
from shadowclone.run.github.models import (
    Annotation,
    CheckRun,
    Comment,
    ContentEntry,
    InlineComment,
    Issue,
    IssueComment,
    Permission,
    PullRequest,
    Repository,
    Review,
    ReviewThread,
    ThreadComment,
    User,
    link_issue,
)
from shadowclone.run.github.wire import GHOST, Waited

__all__ = [
    "GHOST",
    "THREADS_QUERY",
    "Annotation",
    "CheckRun",
    "Comment",
    "ContentEntry",
    "GithubClient",
    "InlineComment",
    "Issue",
    "IssueComment",
    "Permission",
    "PullRequest",
    "Repository",
    "Review",
    "ReviewThread",
    "ThreadComment",
    "User",
    "Waited",
    "link_issue",
]
