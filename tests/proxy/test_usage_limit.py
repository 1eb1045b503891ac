"""A login's usage limit reached: the proxy tells it from a passing rate limit, holds the
engine's request until the reset the provider named, and sends it again; the engine never sees
the 429. Anything else passes through unchanged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.proxy import ModelProxy, StaticCredential
from shadowclone.proxy.limits import LONGEST_WAIT, usage_limit_reset
from shadowclone_testing.fakes.models import ApiError, FakeModelServer, Text, UsageLimit

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
MESSAGE = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "m", "input": "hi", "stream": False}


def test_the_known_forms_are_told() -> None:
    at = int((NOW + timedelta(hours=2)).timestamp())
    anthropic = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(at),
    }
    assert usage_limit_reset(429, anthropic, b"", NOW) == NOW + timedelta(hours=2)
    body = {"error": {"type": "usage_limit_reached", "resets_in_seconds": 90}}
    assert usage_limit_reset(429, {}, json.dumps(body).encode(), NOW) == NOW + timedelta(seconds=90)
    body = {"error": {"type": "usage_limit_reached", "resets_at": at}}
    assert usage_limit_reset(429, {}, json.dumps(body).encode(), NOW) == NOW + timedelta(hours=2)
    # A passing rate limit, another status, or a reset too far away: not a usage limit.
    assert usage_limit_reset(429, {"retry-after": "3"}, b'{"error": {}}', NOW) is None
    assert usage_limit_reset(529, anthropic, b"", NOW) is None
    far = {**anthropic, "anthropic-ratelimit-unified-reset": str(at + 10**6)}
    assert usage_limit_reset(429, far, b"", NOW) is None


@given(
    status=st.sampled_from([200, 400, 429, 500, 529]),
    headers=st.dictionaries(
        st.sampled_from(
            [
                "anthropic-ratelimit-unified-status",
                "anthropic-ratelimit-unified-reset",
                "retry-after",
            ]
        ),
        st.text(max_size=20) | st.integers(-(10**12), 10**12).map(str),
    ),
    body=st.binary(max_size=200)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["error", "type", "resets_at", "resets_in_seconds"]), inner
            )
        ),
        max_leaves=10,
    ).map(lambda value: json.dumps(value).encode()),
)
def test_any_answer_is_a_reset_within_bounds_or_none(
    status: int, headers: dict[str, str], body: bytes
) -> None:
    reset = usage_limit_reset(status, headers, body, NOW)
    if reset is not None:
        assert status == 429
        assert NOW <= reset <= NOW + LONGEST_WAIT


@pytest.fixture
async def limited() -> AsyncIterator[tuple[FakeModelServer, ModelProxy, list[datetime]]]:
    heard: list[datetime] = []

    async def on_usage_limit(reset: datetime) -> bool:
        heard.append(reset)
        return True

    with FakeModelServer() as server:
        async with ModelProxy(server.url, StaticCredential({"x-api-key": "k"})) as proxy:
            proxy.on_usage_limit = on_usage_limit
            await proxy.start_tcp()
            yield server, proxy, heard


@pytest.mark.parametrize("api", ["anthropic", "responses"])
async def test_the_engine_never_sees_the_limit_and_its_request_goes_again(
    limited: tuple[FakeModelServer, ModelProxy, list[datetime]], api: str
) -> None:
    server, proxy, heard = limited
    server.add(UsageLimit(reset_in_s=0.2), UsageLimit(reset_in_s=0.2), Text("after the reset"))
    path, body = ("/v1/messages", MESSAGE) if api == "anthropic" else ("/v1/responses", RESPONSES)
    async with httpx2.AsyncClient(timeout=30) as engine:
        answer = await engine.post(proxy.engine_base_url + path, json=body)
    assert answer.status_code == 200
    assert "after the reset" in answer.text
    assert len(heard) == 2
    sent = [request.body for request in server.model_requests()]
    assert sent == [body, body, body]  # the same request, sent again as it was


async def test_an_error_that_is_no_limit_passes_through(
    limited: tuple[FakeModelServer, ModelProxy, list[datetime]],
) -> None:
    server, proxy, heard = limited
    server.add(ApiError("bad", status=400))
    async with httpx2.AsyncClient(timeout=30) as engine:
        answer = await engine.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
    assert answer.status_code == 400 and "bad" in answer.text
    assert heard == []
