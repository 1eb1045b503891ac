"""Any header set the engine sends reaches the provider with the credential once and nothing
the proxy drops (hop-by-hop, the engine's authentication)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.proxy import (
    ENGINE_AUTH_HEADERS,
    PLACEHOLDERS,
    ModelProxy,
)
from shadowclone.proxy.rules import HOP_BY_HOP, REQUEST_DROPPED, upstream_headers
from shadowclone_testing.fakes.models import FakeModelServer, ModelRequest

pytestmark = pytest.mark.anyio

REAL_KEY = "sk-ant-real-key-0123456789"
PLACEHOLDER = PLACEHOLDERS["anthropic_api_key"]


TOKEN = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,15}", fullmatch=True)
SENSITIVE = sorted(ENGINE_AUTH_HEADERS | HOP_BY_HOP | {"anthropic-beta", "expect", "x-api-key"})
NAME = st.one_of(
    st.sampled_from(SENSITIVE).flatmap(
        lambda name: st.builds(
            lambda flips: "".join(c.upper() if f else c for c, f in zip(name, flips, strict=False)),
            st.lists(st.booleans(), min_size=len(name), max_size=len(name)),
        )
    ),
    TOKEN,
).filter(lambda name: name.lower() not in {"content-length", "transfer-encoding", "host"})
VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip)
HEADER_SETS = st.lists(st.tuples(NAME, VALUE), max_size=12)
CREDENTIALS = st.sampled_from(
    [
        {"x-api-key": REAL_KEY},
        {"authorization": "Bearer real", "anthropic-beta": "oauth-2025-04-20"},
        {"authorization": "Bearer real"},
    ]
)


@given(headers=HEADER_SETS, credential=CREDENTIALS)
def test_upstream_headers_hold_the_credential_once_and_nothing_dropped(
    headers: list[tuple[str, str]], credential: dict[str, str]
) -> None:
    engine = [(name.encode(), value.encode()) for name, value in headers]
    result = [
        (name.decode(), value.decode()) for name, value in upstream_headers(engine, credential)
    ]
    names = [name.lower() for name, _ in result]
    for name, value in credential.items():
        assert names.count(name) == 1
        (sent,) = [v for n, v in result if n.lower() == name]
        if name == "anthropic-beta":
            assert "oauth-2025-04-20" in sent.split(",")
        else:
            assert sent == value
    assert not (set(names) - set(credential)) & REQUEST_DROPPED


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(headers=HEADER_SETS)
async def test_any_header_set_reaches_the_upstream_clean(
    headers: list[tuple[str, str]],
    server: FakeModelServer,
    proxy: ModelProxy,
    assert_clean: Callable[[ModelRequest, Mapping[str, str]], None],
    raw: Callable[[ModelProxy, bytes], Awaitable[bytes]],
    status_of: Callable[[bytes], int],
) -> None:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    hostile = f"x-api-key: {PLACEHOLDER}\r\nAuthorization: Bearer {PLACEHOLDER}\r\n"
    data = f"GET /v1/models HTTP/1.1\r\nHost: evil\r\n{hostile}{head}Connection: close\r\n\r\n"
    before = len(server.requests)
    response = await raw(proxy, data.encode())
    if status_of(response) == 400:  # h11 refused it (an Expect it cannot meet...): nothing sent
        assert len(server.requests) == before
        return
    assert status_of(response) == 200
    request = server.requests[-1]
    assert_clean(request, {"x-api-key": REAL_KEY})
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    listed = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    dropped = REQUEST_DROPPED | listed
    assert not (set(request.headers) - {"host", "x-api-key"}) & dropped
    last = {name.lower(): value for name, value in headers}
    for name, value in last.items():
        if name not in dropped:
            assert request.headers[name] == value


# --------------------------------------------------------------------------- the command
