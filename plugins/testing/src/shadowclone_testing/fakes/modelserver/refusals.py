"""The errors the fake model server answers with in place of a reply: a used-up plan, an API
error."""

from __future__ import annotations

import time
from http import HTTPStatus

from shadowclone_testing.fakes.modelserver.handler import Handler
from shadowclone_testing.fakes.modelserver.replies import ApiError, UsageLimit
from shadowclone_testing.fakes.modelserver.requests import ModelRequest


def refuse(handler: Handler, request: ModelRequest, reply: UsageLimit | ApiError) -> None:
    """Answer `request` with the error `reply` stands for, in the words of the request's API."""
    if isinstance(reply, UsageLimit):
        resets_at = int(time.time() + reply.reset_in_s + 0.999)
        if request.api == "anthropic":
            refusal = {"type": "rate_limit_error", "message": "usage limit reached"}
            handler.send_json(
                HTTPStatus.TOO_MANY_REQUESTS,
                {"type": "error", "error": refusal},
                {
                    "anthropic-ratelimit-unified-status": "rejected",
                    "anthropic-ratelimit-unified-reset": str(resets_at),
                },
            )
        else:
            error: dict[str, object] = {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "resets_at": resets_at,
                "resets_in_seconds": max(0, resets_at - int(time.time())),
            }
            handler.send_json(HTTPStatus.TOO_MANY_REQUESTS, {"error": error})
        return
    kind = "invalid_request_error" if reply.status == 400 else "api_error"
    error = {"type": kind, "message": reply.message}
    handler.send_json(reply.status, {"type": "error", "error": error})
