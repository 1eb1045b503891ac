"""Fixtures the run program's end-to-end tests share (tests/run/test_program*.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from shadowclone_testing.clone_world import World
from shadowclone_testing.fakes.github import FakeGitHub


@pytest.fixture
def world(tmp_path: Path, sc_engines_on_path: Path) -> Iterator[World]:
    """The owner's repository on a fake GitHub, which a stranger may read."""
    with FakeGitHub(tmp_path / "github") as github:
        token = github.add_user("owner", name="The Owner", email="owner@example.com")
        stranger = github.add_user("stranger", name="A Stranger")
        github.create_repo("owner/app", files={"README.md": "# app\n"})
        github.grant("owner/app", "stranger", "read")
        yield World(tmp_path, github, token, stranger)
