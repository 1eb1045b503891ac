"""The ChatGPT plan login through the model proxy, against the fake token endpoint that rotates
refresh tokens: the proxy refreshes once, keeps the rotated token in the login's state folder
for the next clone, never spends a refresh token twice, and the engine's auth.json holds only
placeholders."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.proxy import LoginError, ModelProxy, credential_for_login, engine_files
from shadowclone.proxy.chatgpt import (
    EXPIRED_HELP,
    NO_STATE_HELP,
    PLACEHOLDER_ACCESS,
    STATE_FILE,
    ChatgptCredential,
)
from shadowclone_testing.fakes.chatgpt import ACCOUNT_ID, FakeChatgptLogin, unsigned_jwt
from shadowclone_testing.fakes.models import FakeModelServer

pytestmark = pytest.mark.anyio

BODY = {"model": "m", "input": "hi", "stream": False}
PLACEHOLDER_HEADERS = {"authorization": f"Bearer {PLACEHOLDER_ACCESS}", "chatgpt-account-id": "x"}


@pytest.fixture
def login() -> FakeChatgptLogin:
    return FakeChatgptLogin()


@pytest.fixture
def server(login: FakeChatgptLogin) -> Iterator[FakeModelServer]:
    with FakeModelServer(login=login) as server:
        yield server


def credential(pasted: str, server: FakeModelServer, state: Path | None) -> ChatgptCredential:
    found = credential_for_login(
        "chatgpt-plan", {"codex_auth_json": pasted}, state_dir=state, token_url=server.token_url
    )
    assert isinstance(found, ChatgptCredential)
    return found


async def ask(proxy: ModelProxy, count: int = 1) -> list[int]:
    """`count` model requests at once, as the engine sends them: with the placeholders."""
    async with httpx2.AsyncClient() as client:
        replies = await asyncio.gather(
            *(
                client.post(
                    proxy.engine_base_url + "/v1/responses", json=BODY, headers=PLACEHOLDER_HEADERS
                )
                for _ in range(count)
            )
        )
    return [reply.status_code for reply in replies]


async def through(server: FakeModelServer, cred: ChatgptCredential, count: int = 1) -> list[int]:
    async with ModelProxy(server.url, cred) as proxy:
        await proxy.start_tcp()
        return await ask(proxy, count)


async def test_the_proxy_refreshes_once_and_keeps_the_rotated_token(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    pasted = login.auth_json()
    first = credential(pasted, server, tmp_path)
    assert await through(server, first) == [200]
    assert login.refreshes == []

    login.expire()
    assert await through(server, first, count=5) == [200] * 5
    assert [r.accepted for r in login.refreshes] == [True], "one refresh for five requests"
    saved = json.loads((tmp_path / STATE_FILE).read_text())
    assert saved["auth"]["tokens"]["refresh_token"] == login.refresh_token
    assert (tmp_path / STATE_FILE).stat().st_mode & 0o077 == 0

    # The next clone starts from the same pasted login, which is spent: it takes the state.
    login.expire()
    second = credential(pasted, server, tmp_path)
    assert await through(server, second) == [200]
    assert all(r.accepted for r in login.refreshes) and len(login.refreshes) == 2
    spent = json.loads(pasted)["tokens"]["refresh_token"]
    assert [r.refresh_token for r in login.refreshes].count(spent) == 1


async def test_every_request_upstream_carries_the_real_token_never_a_placeholder(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    cred = credential(login.auth_json(), server, tmp_path)
    login.expire()
    assert await through(server, cred, count=3) == [200] * 3
    for request in server.model_requests():
        assert "placeholder" not in json.dumps(dict(request.headers))
    accepted = [
        r
        for r in server.model_requests()
        if r.headers["authorization"].endswith(tuple(login.access_tokens))
    ]
    assert len(accepted) == 3
    assert all(r.headers["chatgpt-account-id"] == ACCOUNT_ID for r in accepted)


async def test_a_clone_that_finds_the_state_renewed_by_another_takes_it(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    pasted = login.auth_json()
    one, two = credential(pasted, server, tmp_path), credential(pasted, server, tmp_path)
    login.expire()
    assert await through(server, one) == [200]
    # `two` still holds the expired token; on its 401 it finds the state renewed by `one`.
    assert await through(server, two) == [200]
    assert [r.accepted for r in login.refreshes] == [True]


async def test_a_newly_pasted_login_sets_the_old_state_aside(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    old = credential(login.auth_json(), server, tmp_path)
    login.expire()
    assert await through(server, old) == [200]
    other = FakeChatgptLogin()  # the owner ran `codex login` again: another chain of tokens
    fresh = credential(other.auth_json(), server, tmp_path)
    headers = await fresh.headers()
    assert (
        headers["authorization"]
        == f"Bearer {json.loads(other.auth_json())['tokens']['access_token']}"
    )


async def test_a_spent_refresh_token_says_what_to_do(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    pasted = login.auth_json()
    login.expire()
    # Someone else (the owner's own Codex) refreshes first: the pasted refresh token is spent.
    assert (
        login.token_endpoint({"grant_type": "refresh_token", "refresh_token": login.refresh_token})[
            0
        ]
        == 200
    )
    login.expire()
    cred = credential(pasted, server, tmp_path)
    assert await through(server, cred) == [401]
    assert cred.problem == EXPIRED_HELP
    assert not (tmp_path / STATE_FILE).exists()


async def test_without_a_state_folder_the_proxy_never_spends_the_refresh_token(
    server: FakeModelServer, login: FakeChatgptLogin
) -> None:
    cred = credential(login.auth_json(), server, None)
    login.expire()
    assert await through(server, cred) == [401]
    assert login.refreshes == []
    assert cred.problem == NO_STATE_HELP


async def test_an_access_token_about_to_expire_is_refreshed_before_use(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    document = json.loads(login.auth_json())
    document["tokens"]["access_token"] = unsigned_jwt({"exp": int(time.time()) + 5})
    cred = credential(json.dumps(document), server, tmp_path)
    assert await through(server, cred) == [200]
    assert [r.accepted for r in login.refreshes] == [True]
    assert len(server.model_requests()) == 1, "no request went out with the old token"


def test_a_state_folder_the_run_program_cannot_write_is_refused(
    server: FakeModelServer, login: FakeChatgptLogin, tmp_path: Path
) -> None:
    with pytest.raises(LoginError, match="not writable"):
        credential(login.auth_json(), server, tmp_path / "missing")


@pytest.mark.parametrize(
    ("pasted", "problem"),
    [
        ("not json", "not JSON"),
        ("[]", "has no tokens"),
        ('{"tokens": {"access_token": "a"}}', "no tokens.refresh_token"),
        ('{"tokens": {"access_token": "a", "refresh_token": "r"}}', "names no ChatGPT account"),
        (
            '{"tokens": {"access_token": "shadowclone-placeholder-x", "refresh_token": "r"}}',
            "placeholder",
        ),
    ],
)
def test_a_malformed_pasted_login_is_one_clear_error(pasted: str, problem: str) -> None:
    with pytest.raises(LoginError, match=problem):
        credential_for_login("chatgpt-plan", {"codex_auth_json": pasted})


token = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=8, max_size=40)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(access=token, refresh=token, account=token, email=st.emails())
def test_the_engine_s_auth_json_holds_no_token_of_the_login(
    access: str, refresh: str, account: str, email: str
) -> None:
    id_token = unsigned_jwt(
        {"email": email, "https://api.openai.com/auth": {"chatgpt_account_id": account}}
    )
    pasted = json.dumps(
        {
            "tokens": {
                "id_token": id_token,
                "access_token": access,
                "refresh_token": refresh,
                "account_id": account,
            }
        }
    )
    files = engine_files(credential_for_login("chatgpt-plan", {"codex_auth_json": pasted}))
    text = files["auth.json"]
    for value in (access, refresh, account, id_token):
        assert value not in text
    tokens = json.loads(text)["tokens"]
    assert all(
        str(value).startswith("shadowclone-placeholder-") or value.count(".") == 2
        for value in tokens.values()
    )


actions = st.lists(st.sampled_from(["ask", "expire", "next clone", "ask twice"]), max_size=12)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=actions)
def test_any_run_of_clones_and_expiries_never_spends_a_refresh_token_twice(
    steps: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    state = tmp_path_factory.mktemp("state")
    login = FakeChatgptLogin()
    pasted = login.auth_json()

    async def play() -> None:
        with FakeModelServer(login=login) as server:
            cred = credential(pasted, server, state)
            for step in steps:
                if step == "expire":
                    login.expire()
                elif step == "next clone":
                    cred = credential(pasted, server, state)
                else:
                    count = 2 if step == "ask twice" else 1
                    assert await through(server, cred, count) == [200] * count

    asyncio.run(play())
    assert all(r.accepted for r in login.refreshes), login.refreshes
    spent = [r.refresh_token for r in login.refreshes]
    assert len(spent) == len(set(spent))
