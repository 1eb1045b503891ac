"""The model proxy's credential: the one it injects on every request, what it strips of the
engine's, the logins' headers, and a 401 after which a credential renews itself."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

import httpx2
import pytest
from shadowclone.proxy import (
    PLACEHOLDERS,
    LoginError,
    ModelProxy,
    credential_for_login,
)
from shadowclone_testing.fakes.models import ApiError, FakeModelServer, ModelRequest, Text

pytestmark = pytest.mark.anyio

REAL_KEY = "sk-ant-real-key-0123456789"
PLACEHOLDER = PLACEHOLDERS["anthropic_api_key"]
MESSAGE = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
HOSTILE_HEADERS = {
    "x-api-key": PLACEHOLDER,
    "Authorization": f"Bearer {PLACEHOLDER}",
    "Proxy-Authorization": "Basic ZXZpbDpldmls",
    "ChatGPT-Account-Id": "acct-from-the-engine",
    "Cookie": "session=from-the-engine",
}


async def test_the_upstream_sees_the_real_credential_on_every_request(
    server: FakeModelServer,
    proxy: ModelProxy,
    caplog: pytest.LogCaptureFixture,
    assert_clean: Callable[[ModelRequest, Mapping[str, str]], None],
) -> None:
    caplog.set_level("DEBUG", logger="shadowclone.proxy")
    server.add(Text("One."), Text("Two, streamed.", chunk_delay_s=0.01))
    async with httpx2.AsyncClient(
        base_url=proxy.engine_base_url, headers=HOSTILE_HEADERS
    ) as client:
        # One keep-alive connection, several kinds of request.
        assert (await client.get("/v1/models")).status_code == 200
        assert (await client.post("/v1/messages", json=MESSAGE)).json()["content"][0][
            "text"
        ] == "One."
        streamed = await client.post("/v1/messages", json={**MESSAGE, "stream": True})
        assert "Two," in streamed.text
        counted = await client.post("/v1/messages/count_tokens?beta=true", json=MESSAGE)
        assert counted.status_code == 200

    assert len(server.requests) == 4
    for request in server.requests:
        assert_clean(request, {"x-api-key": REAL_KEY})
        assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert server.requests[1].body == MESSAGE
    assert server.requests[3].query == {"beta": "true"}
    # One line per request; no header value, no body, no query.
    async with asyncio.timeout(10):  # the line is written once the exchange is wound up
        while caplog.text.count(" -> 200") < 4:
            await asyncio.sleep(0.01)
    for secret in (REAL_KEY, PLACEHOLDER, "session=from-the-engine", "beta=true", '"hi"'):
        assert secret not in caplog.text


async def test_a_subscription_token_is_a_bearer_with_the_oauth_beta_added(
    server: FakeModelServer,
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
    assert_clean: Callable[[ModelRequest, Mapping[str, str]], None],
) -> None:
    credential = credential_for_login("claude-subscription", {"claude_code_oauth_token": "oat"})
    async with running(server.url, credential) as proxy, httpx2.AsyncClient() as client:
        url = proxy.engine_base_url + "/v1/messages"
        await client.post(url, json=MESSAGE, headers={"anthropic-beta": "claude-code-20250219"})
        await client.post(url, json=MESSAGE, headers={"anthropic-beta": "oauth-2025-04-20, x-1"})
        await client.post(url, json=MESSAGE, headers={"authorization": "Bearer placeholder"})

    first, second, third = server.requests
    for request in server.requests:
        assert_clean(request, {"authorization": "Bearer oat"})
    assert first.headers["anthropic-beta"] == "claude-code-20250219,oauth-2025-04-20"
    assert second.headers["anthropic-beta"] == "oauth-2025-04-20,x-1"
    assert third.headers["anthropic-beta"] == "oauth-2025-04-20"


def test_the_logins_and_their_headers() -> None:
    async def headers_of(login: str, values: Mapping[str, str]) -> Mapping[str, str]:
        return await credential_for_login(login, values).headers()

    assert asyncio.run(headers_of("claude-api-key", {"anthropic_api_key": "k"})) == {
        "x-api-key": "k"
    }
    assert asyncio.run(headers_of("openai-api-key", {"openai_api_key": " k\n"})) == {
        "authorization": "Bearer k"
    }
    with pytest.raises(LoginError, match="no value for openai_api_key"):
        credential_for_login("openai-api-key", {"anthropic_api_key": "k"})
    with pytest.raises(LoginError, match="placeholder"):
        credential_for_login("claude-api-key", {"anthropic_api_key": PLACEHOLDER})
    with pytest.raises(LoginError, match="cannot serve the login 'gemini'"):
        credential_for_login("gemini", {"codex_auth_json": "{}"})
    with pytest.raises(LoginError, match="codex_auth_json .* has no tokens"):
        credential_for_login("chatgpt-plan", {"codex_auth_json": "{}"})
    secret = credential_for_login("claude-api-key", {"anthropic_api_key": "sk-secret-42"})
    assert "sk-secret-42" not in repr(secret)
    assert all(value.startswith("shadowclone-placeholder-") for value in PLACEHOLDERS.values())


class Renewing:
    """A credential that renews itself once when the provider says 401."""

    problem: str | None = None

    def __init__(self) -> None:
        self.token = "old"
        self.failed: list[Mapping[str, str]] = []

    async def headers(self) -> Mapping[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    async def refreshed(self, failed: Mapping[str, str]) -> bool:
        self.failed.append(failed)
        self.token = "new"
        return len(self.failed) == 1


async def test_a_401_is_retried_once_after_the_credential_renews(
    server: FakeModelServer,
    running: Callable[..., contextlib.AbstractAsyncContextManager[ModelProxy]],
) -> None:
    credential = Renewing()
    server.add(ApiError("expired", status=401), Text("Fresh."))
    async with running(server.url, credential) as proxy, httpx2.AsyncClient() as client:
        response = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
        assert response.json()["content"][0]["text"] == "Fresh."
        # Renewing again gives up: the 401 reaches the engine.
        server.add(ApiError("expired", status=401), ApiError("still", status=401))
        again = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
        assert again.status_code == 401

    old, new, *_ = server.requests
    assert old.headers["authorization"] == "Bearer old"
    assert new.headers["authorization"] == "Bearer new"
    assert old.body == new.body == MESSAGE
    assert credential.failed[0] == {"authorization": "Bearer old"}
    assert len(server.requests) == 3


async def test_a_static_credential_passes_a_401_through(
    server: FakeModelServer, proxy: ModelProxy
) -> None:
    server.add(ApiError("bad key", status=401))
    async with httpx2.AsyncClient() as client:
        response = await client.post(proxy.engine_base_url + "/v1/messages", json=MESSAGE)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "bad key"
    assert len(server.requests) == 1


# --------------------------------------------------------------------------- streaming
