"""A provider's "usage limit reached" answer, told apart from a passing rate limit: the login has
used up its plan until a time the answer names. The model proxy holds the engine's request
until then rather than let the engine fail (`server.ModelProxy.on_usage_limit`).

The two forms known: Anthropic's unified rate-limit headers on a 429
(`anthropic-ratelimit-unified-status: rejected`, `anthropic-ratelimit-unified-reset: <epoch
seconds>`, as a Claude subscription gets them), and the Responses API's 429 error of type
`usage_limit_reached` with `resets_at` (epoch seconds) or `resets_in_seconds` (a ChatGPT plan).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

MAX_ERROR_BYTES = 64 * 1024
"""A 429's body is read whole (to tell a usage limit) only up to this size."""
LONGEST_WAIT = timedelta(hours=8)
"""A reset further away than this is not waited for: the engine gets the answer."""


def usage_limit_reset(
    status: int, headers: Mapping[str, str], body: bytes, now: datetime
) -> datetime | None:
    """When the login's usage limit resets, if this answer says it is reached; None for any
    other answer (a passing rate limit included)."""
    if status != 429:
        return None
    reset: datetime | None = None
    if headers.get("anthropic-ratelimit-unified-status", "").strip().lower() == "rejected":
        reset = _epoch(headers.get("anthropic-ratelimit-unified-reset"))
    if reset is None:
        reset = _responses_reset(body, now)
    if reset is None or reset - now > LONGEST_WAIT:
        return None
    return max(reset, now)


def _responses_reset(body: bytes, now: datetime) -> datetime | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict) or error.get("type") != "usage_limit_reached":
        return None
    at = _epoch(error.get("resets_at"))
    if at is not None:
        return at
    seconds = error.get("resets_in_seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 <= seconds < 1e7:
        return now + timedelta(seconds=float(seconds))
    return None


def _epoch(value: object) -> datetime | None:
    try:
        seconds = float(str(value).strip()) if value is not None else None
    except ValueError:
        return None
    if seconds is None or not 0 < seconds < 1e11:
        return None
    return datetime.fromtimestamp(seconds, UTC)
