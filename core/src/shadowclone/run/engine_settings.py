"""The engines' own files in a workspace whose head is not the owner's: taken from the base.

An engine loads configuration from the checkout it starts in: Claude Code its `.claude/`
(settings with hooks, skills, agents, commands), `.mcp.json` and its memory files, Codex its
`.codex/` layer, its skills (`.agents/`) and `AGENTS.md`. A stranger's pull request can add
any of them, and a hook or an MCP server would run its code as soon as the engine starts,
in a review that promises it never runs. The drivers are told to load none of them
(`EngineTask.project_settings`); and before any engine starts on such a head, the run program
puts the base branch's versions of these paths in the work tree instead of the pull request's
(removing those the base lacks), wherever they sit in the tree. Only the work tree changes:
the commits, and so the review's diff (`base...HEAD`), still hold the pull request's changes
to them.
"""

from __future__ import annotations

import logging
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import attrs

from shadowclone.run.identity import EngineIdentity
from shadowclone.run.workspace import Workspace

log = logging.getLogger(__name__)

FOLDERS = frozenset({".claude", ".codex", ".agents"})
"""Folders an engine reads settings, hooks, skills, agents or commands from."""
FILES = frozenset({".mcp.json", "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENTS.override.md"})
"""Files an engine loads by itself: project MCP servers, memory and instructions."""


@attrs.frozen
class Taken:
    """What `take_from_base` changed in the work tree, as paths in the repository."""

    from_base: tuple[str, ...] = ()
    """Replaced by the base's version."""
    removed: tuple[str, ...] = ()
    """The head has them and the base does not: gone from the work tree."""
    passed_over: tuple[str, ...] = ()
    """Under a folder that is a link or a file in the work tree: nothing was written there."""

    def describe(self, base: str) -> str:
        if not self.from_base and not self.removed and not self.passed_over:
            return (
                "the pull request changes none of the engines' settings (.claude/, .mcp.json, "
                "CLAUDE.md, .codex/, .agents/, AGENTS.md): the engine loads none of the "
                "workspace's settings all the same"
            )
        parts = []
        if self.from_base:
            parts.append(f"taken from the base {base[:12]}: {', '.join(self.from_base)}")
        if self.removed:
            parts.append(f"removed (not on the base): {', '.join(self.removed)}")
        if self.passed_over:
            parts.append(f"left alone (under a link): {', '.join(self.passed_over)}")
        return (
            "the engines' settings of the pull request are not used; "
            + "; ".join(parts)
            + " (its changes to them are still in its commits)"
        )


def settings_root(path: str) -> str | None:
    """The engine settings path `path` (a file in the repository) is in, or None: its first
    folder named in `FOLDERS`, or itself when its name is in `FILES`."""
    parts = PurePosixPath(path).parts
    for index, part in enumerate(parts):
        if part in FOLDERS:
            return "/".join(parts[: index + 1])
    return path if parts and parts[-1] in FILES else None


def _entries(workspace: Workspace, commit: str) -> dict[str, set[tuple[str, str]]]:
    """The settings roots of `commit`, each with its files as (path, mode and object)."""
    listed = workspace.git("ls-tree", "-r", "-z", "--full-tree", commit)
    roots: dict[str, set[tuple[str, str]]] = {}
    for record in listed.split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        root = settings_root(path)
        if root is not None:
            mode, _, rest = meta.partition(" ")
            roots.setdefault(root, set()).add((path, f"{mode} {rest.partition(' ')[2]}"))
    return roots


def _real_folders_to(workspace: Path, root: str) -> bool:
    """True if every folder above `root` in the work tree is a real folder, not a link: only
    then is removing or writing `root` confined to the work tree."""
    here = workspace
    for part in PurePosixPath(root).parts[:-1]:
        here = here / part
        try:
            if not stat.S_ISDIR(here.lstat().st_mode):
                return False
        except FileNotFoundError:
            return True  # made by git below, as folders
    return True


def _remove(path: Path) -> None:
    """Remove `path`, a link itself (never what it points to), a file or a whole folder."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def take_from_base(
    workspace: Workspace, identity: EngineIdentity | None = None, base: str | None = None
) -> Taken:
    """Put the base's version (`base`, default the workspace's base commit) of every engine
    settings path the head changes in the work tree, or remove it where the base has none.
    Run by the run program before the engine starts; what it writes stays shared with the
    engine (`identity`)."""
    base = base or workspace.base_ref
    head = _entries(workspace, "HEAD")
    wanted = _entries(workspace, base)
    changed = sorted(
        root for root in head.keys() | wanted.keys() if head.get(root) != wanted.get(root)
    )
    from_base: list[str] = []
    removed: list[str] = []
    passed_over: list[str] = []
    for root in changed:
        if not _real_folders_to(workspace.path, root):
            log.warning("not taking %s from the base: a folder above it is a link", root)
            passed_over.append(root)
            continue
        _remove(workspace.path / root)
        (from_base if root in wanted else removed).append(root)
    if from_base:
        _restore(workspace, base, from_base)
        _share(identity, workspace.path, from_base)
    return Taken(tuple(from_base), tuple(removed), tuple(passed_over))


def _restore(workspace: Workspace, base: str, roots: Iterable[str]) -> None:
    """Write the base's files of `roots` into the work tree only (the index, like the commits,
    stays the head's), with the run program's git: no hook or filter of the head's runs."""
    workspace.git(
        "restore",
        f"--source={base}",
        "--worktree",
        "--",
        *roots,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    )


def _share(identity: EngineIdentity | None, workspace: Path, roots: Iterable[str]) -> None:
    """Keep what git wrote shared with the engine, as the rest of the work tree is (the run
    program's umask and the workspace's setgid folders do it already where it runs apart)."""
    if identity is None:
        return
    for root in roots:
        path = workspace / root
        if path.exists() and not path.is_symlink():
            identity.share(path)
