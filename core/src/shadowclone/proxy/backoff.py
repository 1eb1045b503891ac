"""When to send a request again that the provider answered "overloaded" (529, 503) or "too many
requests" (429 without a usage limit), or that could not reach it: exponential backoff with
full jitter, the provider's Retry-After honoured, within a bounded number of tries."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

import attrs

from shadowclone.httpio import retry_after_s

RETRIED_STATUSES = frozenset({429, 503, 529})
BASE_S = 1.0
CAP_S = 30.0
"""No single wait is longer (a Retry-After asking more is cut to this)."""
TRIES = 6
"""Sends of one request at most, the first included."""


@attrs.define
class Backoff:
    base_s: float = BASE_S
    cap_s: float = CAP_S
    tries: int = TRIES
    random: Callable[[float, float], float] = random.uniform
    sent: int = 1

    def next(self, retry_after_s: float | None = None) -> float | None:
        """How long to wait before the next send; None when the tries are spent."""
        if self.sent >= self.tries:
            return None
        ceiling = min(self.cap_s, self.base_s * 2 ** (self.sent - 1))
        self.sent += 1
        if retry_after_s is not None:
            return min(self.cap_s, max(0.0, retry_after_s))
        return self.random(0.0, ceiling)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the provider asks to wait: `retry-after-ms`, or `retry-after` in seconds or as
    an HTTP date."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            milliseconds = float(value.strip())
        except ValueError:
            milliseconds = -1.0
        if 0 <= milliseconds < 1e9:
            return milliseconds / 1000
    value = headers.get("retry-after")
    return None if value is None else retry_after_s(value)
