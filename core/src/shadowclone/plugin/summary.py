"""One-line summaries of what an engine does, for `ToolUseEvent.detail` (engine plugins use
these so every engine's progress lines read alike)."""

from __future__ import annotations

import json
from collections.abc import Mapping

DETAIL_LENGTH = 200
"""A tool use's detail is one line of at most this many characters."""

DETAIL_KEYS = (
    "question",
    "command",
    "cmd",
    "file_path",
    "notebook_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
)
"""Argument keys that best say what a tool call does, most telling first."""


def one_line(text: str, length: int = DETAIL_LENGTH) -> str:
    line = " ".join(text.split())
    return line if len(line) <= length else line[: length - 1] + "…"


def arguments_detail(arguments: object) -> str:
    """A tool call's arguments (a mapping, or JSON text of one) in one line: its command, path,
    query... or its JSON."""
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = json.loads(text)
        except ValueError:
            return one_line(text)
    if not isinstance(arguments, Mapping):
        return ""
    for key in DETAIL_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(value)
    return one_line(json.dumps(arguments, ensure_ascii=False)) if arguments else ""
