"""The engines' settings of a head that is not the owner's: the base's in the work tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from shadowclone.run.engine_settings import Taken, settings_root, take_from_base
from shadowclone.run.workspace import Workspace

GIT = ["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def commit(repo: Path, files: dict[str, str | None], links: dict[str, str] | None = None) -> str:
    """Commit `files` (None removes one) and symbolic `links`; returns the commit."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            git(repo, "rm", "-r", "-q", "--", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name, target in (links or {}).items():
        os.symlink(target, repo / name)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "change")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize(
    ("path", "root"),
    [
        (".claude/settings.json", ".claude"),
        (".claude", ".claude"),  # a link, as the tree holds it
        ("sub/.claude/skills/x/SKILL.md", "sub/.claude"),
        ("a/.codex/b/.claude/c", "a/.codex"),
        (".agents/skills/x/SKILL.md", ".agents"),
        (".mcp.json", ".mcp.json"),
        ("docs/AGENTS.md", "docs/AGENTS.md"),
        ("CLAUDE.local.md", "CLAUDE.local.md"),
        ("src/claude.py", None),
        (".claudex/settings.json", None),
        ("CLAUDE.md/notes", None),
        ("README.md", None),
    ],
)
def test_the_settings_root_of_a_path(path: str, root: str | None) -> None:
    assert settings_root(path) == root


def test_the_base_s_settings_replace_the_head_s_in_the_work_tree_only(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the workspace's\n")
    git(repo, "init", "-q", "-b", "main")
    base = commit(
        repo,
        {
            ".claude/settings.json": '{"base": true}\n',
            "CLAUDE.md": "base rules\n",
            "sub/AGENTS.md": "the same on both\n",
            "linked/.claude/settings.json": "{}\n",
            "app.py": "print('base')\n",
        },
    )
    head = commit(
        repo,
        {
            ".claude/settings.json": '{"hooks": "stranger"}\n',
            ".claude/skills/x/SKILL.md": "stranger skill\n",
            "CLAUDE.md": "stranger rules\n",
            ".mcp.json": "{}\n",
            "lib/.codex/config.toml": "notify = []\n",
            "linked": None,
            "app.py": "print('head')\n",
        },
        links={".agents": str(outside), "linked": str(outside)},
    )
    workspace = Workspace(repo, "", base)

    taken = take_from_base(workspace)

    assert taken == Taken(
        from_base=(".claude", "CLAUDE.md"),
        removed=(".agents", ".mcp.json", "lib/.codex"),
        passed_over=("linked/.claude",),
    )
    assert (repo / ".claude/settings.json").read_text() == '{"base": true}\n'
    assert not (repo / ".claude/skills").exists()
    assert (repo / "CLAUDE.md").read_text() == "base rules\n"
    assert not os.path.lexists(repo / ".mcp.json") and not os.path.lexists(repo / ".agents")
    assert not (repo / "lib/.codex").exists() and (repo / "lib").is_dir()
    assert (repo / "app.py").read_text() == "print('head')\n"  # the rest is the head's
    assert (repo / "sub/AGENTS.md").read_text() == "the same on both\n"
    assert sorted(path.name for path in outside.iterdir()) == ["keep"]  # nothing through links
    # The commits and the index are the head's: the review's diff shows its changes.
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "diff", "--cached", "--name-only") == ""
    changed = git(repo, "diff", "--name-only", f"{base}...HEAD").split()
    assert ".claude/settings.json" in changed and ".mcp.json" in changed
    description = taken.describe(base)
    assert f"taken from the base {base[:12]}: .claude, CLAUDE.md" in description
    assert "removed (not on the base): .agents, .mcp.json, lib/.codex" in description


def test_a_head_that_changes_no_settings_changes_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, {".claude/settings.json": "{}\n", "AGENTS.md": "rules\n"})
    commit(repo, {"app.py": "print('head')\n"})

    taken = take_from_base(Workspace(repo, "", base))

    assert taken == Taken()
    assert "changes none of the engines' settings" in taken.describe(base)
    assert git(repo, "status", "--porcelain") == ""
