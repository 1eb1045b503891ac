"""A fake GitHub on loopback: REST under `/api/v3`, git smart HTTP, state kept in a folder.

For example::

    with FakeGitHub(tmp_path / "github") as gh:
        token = gh.add_user("octo", name="Octo Cat", email="octo@example.com")
        gh.create_repo("octo/hello", files={"hello.py": "print('hi')"})
        number = gh.create_issue("octo/hello", author="octo", title="Say hello twice")
        # point `[github] api_url` at gh.api_url and `[github] url` at gh.url
"""

from __future__ import annotations

from shadowclone_testing.fakes.github.model import (
    Annotation,
    CheckRun,
    Comment,
    Issue,
    LoggedRequest,
    Permission,
    PullFields,
    Review,
    ReviewComment,
    User,
)
from shadowclone_testing.fakes.github.server import FakeGitHub

__all__ = [
    "Annotation",
    "CheckRun",
    "Comment",
    "FakeGitHub",
    "Issue",
    "LoggedRequest",
    "Permission",
    "PullFields",
    "Review",
    "ReviewComment",
    "User",
]
