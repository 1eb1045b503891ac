"""A review in GitHub's own form: the engine reports each finding (a priority, a file, lines, a
body) through a tool of the ask server, and the clone posts one review of event COMMENT with
them as inline comments.

GitHub refuses a whole review when one comment names a line outside the diff, so each finding
is checked against the pull request's diff first (`git diff base...HEAD`, as GitHub shows it);
what does not fit, and what is past the cap, goes into the review's body. A review never
approves nor requests changes: the owner decides that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from shadowclone.run.ask.tool import Refused
from shadowclone.run.github import InlineComment

PRIORITIES: Final = ("P0", "P1", "P2", "P3")
MAX_FINDINGS = 50
"""Findings one review takes at most; the tool refuses more."""
MAX_INLINE = 25
"""Inline comments one review posts at most (the most urgent first); the rest go to its body."""
MAX_BODY_CHARS = 4_000

TOOL_NAME = "review_finding"
DESCRIPTION = """\
Report one finding of your review of this pull request: a problem in its diff worth the
author's attention. Each becomes a comment on those lines of the pull request when you finish.

Use it only while reviewing a pull request. `priority`: P0 (must fix: broken, insecure, data
loss), P1 (should fix before merging), P2 (worth fixing), P3 (a nit). `path` is relative to the
repository's root; `line` the last line of the range in the pull request's head (the new
version of the file), `start_line` its first line if it spans several. Choose lines the pull
request changed or that sit next to a change: a finding elsewhere goes into the review's text
instead. Keep `title` to one line and say in `body` what is wrong and how to fix it. Your final
answer stays the review's summary; do not repeat the findings there.
"""

INPUT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "priority": {"type": "string", "enum": list(PRIORITIES), "title": "Priority"},
        "path": {"type": "string", "title": "Path", "description": "The file, from the root."},
        "line": {"type": "integer", "minimum": 1, "title": "Line"},
        "start_line": {"type": "integer", "minimum": 1, "title": "Start line"},
        "title": {"type": "string", "title": "Title"},
        "body": {"type": "string", "title": "Body"},
    },
    "required": ["priority", "path", "line", "title", "body"],
}


@attrs.frozen
class Finding:
    priority: str
    path: str
    line: int
    title: str
    body: str
    start_line: int | None = None

    def heading(self) -> str:
        return f"[{self.priority}] {self.title}"

    def where(self) -> str:
        lines = f"{self.start_line}-{self.line}" if self.start_line else str(self.line)
        return f"{self.path}:{lines}"


class FindingsTool:
    """The `review_finding` tool: findings are kept in order for the review's post. It refuses
    while the clone is not reviewing (`reviewing` says)."""

    name = TOOL_NAME

    def __init__(self, reviewing: Callable[[], bool]) -> None:
        self.reviewing = reviewing
        self.findings: list[Finding] = []

    def listing(self) -> Mapping[str, Any]:
        return {
            "name": TOOL_NAME,
            "title": "Report a review finding",
            "description": DESCRIPTION,
            "inputSchema": INPUT_SCHEMA,
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        }

    async def call(self, arguments: Mapping[str, Any]) -> str:
        if not self.reviewing():
            raise Refused("This clone is not reviewing a pull request: report no findings.")
        if len(self.findings) >= MAX_FINDINGS:
            raise Refused(f"A review takes at most {MAX_FINDINGS} findings: keep the worst.")
        finding = parse_finding(arguments)
        self.findings.append(finding)
        return f"Noted finding {len(self.findings)} on {finding.where()}."


def parse_finding(arguments: Mapping[str, Any]) -> Finding:
    def text(key: str, limit: int) -> str:
        value = arguments.get(key)
        if not isinstance(value, str) or not value.strip():
            raise Refused(f"`{key}` must be a non-empty string.")
        return value.strip()[:limit]

    def number(key: str) -> int | None:
        value = arguments.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 10**7:
            raise Refused(f"`{key}` must be a line number (1 or more).")
        return value

    priority = text("priority", 2).upper()
    if priority not in PRIORITIES:
        raise Refused(f"`priority` must be one of {', '.join(PRIORITIES)}.")
    path = text("path", 1_000).removeprefix("./")
    if path.startswith("/") or ".." in path.split("/"):
        raise Refused("`path` is relative to the repository's root, inside it.")
    line = number("line")
    if line is None:
        raise Refused("`line` is required.")
    start = number("start_line")
    if start is not None and start >= line:
        start = None if start == line else _refuse_order()
    return Finding(
        priority,
        path,
        line,
        text("title", 200),
        text("body", MAX_BODY_CHARS),
        start,
    )


def _refuse_order() -> int:
    raise Refused("`start_line` must come before `line`.")


def commentable(diff: str) -> dict[str, list[range]]:
    """The lines of each file's new side that GitHub takes a comment on: those of the diff's
    hunks (changed lines and their context)."""
    try:
        patch = PatchSet(diff)
    except UnidiffParseError:
        return {}
    lines: dict[str, list[range]] = {}
    for changed in patch:
        if changed.is_removed_file:
            continue
        path = re.sub(r"^b/", "", changed.target_file)
        lines[path] = [
            range(hunk.target_start, hunk.target_start + hunk.target_length) for hunk in changed
        ]
    return lines


def place(
    findings: Sequence[Finding], lines: Mapping[str, list[range]]
) -> tuple[list[Finding], list[Finding]]:
    """The findings that fit one hunk of the diff (the most urgent first, at most
    `MAX_INLINE`), and the rest."""
    inline: list[Finding] = []
    rest: list[Finding] = []
    for finding in sorted(findings, key=lambda f: PRIORITIES.index(f.priority)):
        first = finding.start_line or finding.line
        fits = any(first in hunk and finding.line in hunk for hunk in lines.get(finding.path, []))
        (inline if fits and len(inline) < MAX_INLINE else rest).append(finding)
    return inline, rest


def inline_comment(finding: Finding) -> InlineComment:
    return InlineComment(
        path=finding.path,
        line=finding.line,
        start_line=finding.start_line,
        body=f"**{finding.heading()}**\n\n{finding.body}",
    )


def review_body(summary: str, rest: Sequence[Finding]) -> str:
    if not rest:
        return summary
    listed = "\n".join(f"- **{f.heading()}** ({f.where()}): {f.body}" for f in rest)
    return f"{summary}\n\n### Findings not on the diff's lines\n\n{listed}"
