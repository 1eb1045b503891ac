"""An overloaded provider (529, 503, a 429 that is no usage limit) or one that cannot be reached:
the proxy sends the request again after exponential, jittered waits (the provider's Retry-After
honoured), at most `TRIES` sends, never once the answer began, and the engine gets the last
answer unchanged when the tries run out."""

from __future__ import annotations

import email.utils
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.proxy import ModelProxy, StaticCredential
from shadowclone.proxy.backoff import CAP_S, TRIES, Backoff, retry_after
from shadowclone_testing.fakes.models import ApiError, FakeModelServer, Text

pytestmark = pytest.mark.anyio

MESSAGE = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


@given(
    base=st.floats(0.01, 5),
    cap=st.floats(0.1, 60),
    tries=st.integers(1, 10),
    asked=st.lists(st.none() | st.floats(0, 1000), max_size=12),
)
def test_waits_grow_within_the_envelope_and_stop_at_the_tries(
    base: float, cap: float, tries: int, asked: list[float | None]
) -> None:
    backoff = Backoff(base_s=base, cap_s=cap, tries=tries)
    waits = []
    for n, retry in enumerate(asked):
        wait = backoff.next(retry)
        if n + 1 >= tries:
            assert wait is None
            continue
        assert wait is not None
        assert 0 <= wait <= cap
        if retry is None:
            assert wait <= min(cap, base * 2**n)
        else:
            assert wait == min(cap, retry)
        waits.append(wait)
    assert len(waits) <= tries - 1


@given(st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "x"]), st.text()))
def test_retry_after_is_seconds_or_none(headers: dict[str, str]) -> None:
    seconds = retry_after(headers)
    assert seconds is None or 0 <= seconds <= 1e7


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    # An HTTP date (RFC 9110): the time until it, none for one already past.
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    ahead = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    seconds = retry_after({"retry-after": ahead})
    assert seconds is not None and 80 <= seconds <= 90
    assert retry_after({"retry-after": "soon"}) is None


@pytest.fixture
async def quick() -> AsyncIterator[tuple[FakeModelServer, ModelProxy, list[int]]]:
    told: list[int] = []
    with FakeModelServer() as server:
        async with ModelProxy(server.url, StaticCredential({"x-api-key": "k"})) as proxy:
            proxy.backoff = lambda: Backoff(base_s=0.01, cap_s=0.05)
            proxy.on_overload = told.append
            await proxy.start_tcp()
            yield server, proxy, told


async def post(proxy: ModelProxy) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as engine:
        return await engine.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)


async def test_an_overload_storm_is_ridden_out(
    quick: tuple[FakeModelServer, ModelProxy, list[int]],
) -> None:
    server, proxy, told = quick
    server.add(
        ApiError("overloaded", 529), ApiError("busy", 503), ApiError("slow", 429), Text("ok")
    )
    answer = await post(proxy)
    assert answer.status_code == 200 and "ok" in answer.text
    assert told == [529, 503, 429]
    bodies = [request.body for request in server.model_requests()]
    assert bodies == [MESSAGE] * 4


async def test_when_the_tries_run_out_the_engine_gets_the_last_answer(
    quick: tuple[FakeModelServer, ModelProxy, list[int]],
) -> None:
    server, proxy, told = quick
    server.add(*[ApiError("overloaded", 529)] * TRIES, Text("too late"))
    answer = await post(proxy)
    assert answer.status_code == 529 and "overloaded" in answer.text
    assert len(server.model_requests()) == TRIES
    assert len(told) == TRIES - 1


async def test_other_errors_are_not_sent_again(
    quick: tuple[FakeModelServer, ModelProxy, list[int]],
) -> None:
    server, proxy, told = quick
    server.add(ApiError("bad", 400), ApiError("broken", 500), Text("unseen"))
    assert (await post(proxy)).status_code == 400
    assert (await post(proxy)).status_code == 500
    assert told == [] and len(server.model_requests()) == 2


def test_the_cap_bounds_a_long_retry_after() -> None:
    assert Backoff().next(3600) == CAP_S
