"""Matching a REST path to the handler of its route."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

Reply = tuple[int, Any]
Handler = Callable[..., Reply]


@attrs.frozen
class Route:
    """One REST call the fake answers: its method, its path as a pattern, its handler."""

    method: str
    regex: re.Pattern[str]
    handler: Handler

    @classmethod
    def of(cls, method: str, pattern: str, handler: Handler) -> Route:
        """`{name}` in `pattern` matches one path segment, `{name+}` the rest of the path
        (branch names hold slashes)."""

        def group(match: re.Match[str]) -> str:
            return f"(?P<{match[1]}>{'.+' if match[2] else '[^/]+'})"

        return cls(
            method, re.compile("^" + re.sub(r"\{(\w+)(\+?)\}", group, pattern) + "$"), handler
        )
