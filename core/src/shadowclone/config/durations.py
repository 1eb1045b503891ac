"""Durations the owner writes (`30d`, `12h`), in the config and on the command line."""

from __future__ import annotations

import re
from datetime import timedelta

from shadowclone.errors import BadInput

_DURATION = re.compile(r"(\d{1,9})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `1w2d`, `90m`, `45s`: one or more whole numbers, each with its unit."""
    cleaned = text.strip().lower()
    if not cleaned or _DURATION.sub("", cleaned):
        raise BadInput(
            f"duration {text!r}: expected a number and a unit (s, m, h, d or w), "
            "such as 30d, 12h or 1w2d"
        )
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(cleaned))
    if seconds > 100 * 366 * 86400:
        raise BadInput(f"duration {text!r}: expected at most 100 years")
    return timedelta(seconds=seconds)
