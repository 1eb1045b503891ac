"""A pull request's diff as GitHub reads it for review comments: the hunks of `git diff -U3`
between the merge base and the head, and which lines of each side a comment may name."""

from __future__ import annotations

from pathlib import Path

import attrs
from unidiff.patch import Hunk, PatchSet

from shadowclone_testing.fakes.github import git
from shadowclone_testing.fakes.github.model import Side


@attrs.frozen
class Place:
    """Where a comment sits: its hunk up to the line (GitHub's `diff_hunk`) and its position."""

    diff_hunk: str
    position: int


def file_hunks(repo: Path, base: str, head: str) -> dict[str, list[Hunk]]:
    """Each changed file's hunks, by its path in the head (its old path if it was deleted)."""
    text = git.git(
        repo, "diff", "-U3", "--no-color", "--no-renames", f"{base}...{head}", strip=False
    )
    return {patched.path: list(patched) for patched in PatchSet(text)}


def _number(line_type: str, source: int | None, target: int | None, side: Side) -> int | None:
    if side == "LEFT":
        return source if line_type != "+" else None
    return target if line_type != "-" else None


def locate(hunks: list[Hunk], line: int, side: Side) -> tuple[int, int] | None:
    """(hunk index, position) of `line` on `side`, or None if no hunk shows it."""
    position = 0
    for index, hunk in enumerate(hunks):
        if index > 0:
            position += 1  # a later hunk's `@@` header counts as a line
        for diff_line in hunk:
            position += 1
            numbered = _number(
                diff_line.line_type, diff_line.source_line_no, diff_line.target_line_no, side
            )
            if numbered == line:
                return index, position
    return None


def place(hunks: list[Hunk], line: int, side: Side) -> Place | None:
    """The `diff_hunk` and position of a comment on `line`, or None outside the diff."""
    found = locate(hunks, line, side)
    if found is None:
        return None
    index, position = found
    hunk = hunks[index]
    shown = [str(hunk).splitlines()[0]]
    for diff_line in hunk:
        shown.append(str(diff_line).rstrip("\n"))
        if (
            _number(diff_line.line_type, diff_line.source_line_no, diff_line.target_line_no, side)
            == line
        ):
            break
    return Place("\n".join(shown), position)


def at_position(hunks: list[Hunk], position: int) -> tuple[int, Side] | None:
    """The line and side the legacy `position` names, or None if it names no line."""
    counted = 0
    for index, hunk in enumerate(hunks):
        if index > 0:
            counted += 1
            if counted == position:
                return None  # a hunk header
        for diff_line in hunk:
            counted += 1
            if counted == position:
                if diff_line.line_type == "-" and diff_line.source_line_no is not None:
                    return diff_line.source_line_no, "LEFT"
                if diff_line.target_line_no is not None:
                    return diff_line.target_line_no, "RIGHT"
                return None
    return None
