"""The run program's ask server at the HTTP level: what the SDK's client never sends.

Whatever reaches the port (any bytes, any JSON, any method or path), the server answers with a
status and stays up for the engine; only a request with the clone's token gets past the door.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Answer, ChosenBy, ProgressKind
from shadowclone.redact import Redactor
from shadowclone.run.ask import TOOL_NAME
from shadowclone.run.ask.http import PROTOCOL_VERSIONS, AskService

pytestmark = pytest.mark.anyio

BOUND_S = 30.0
"""A generous bound that turns a hang into a failure; no test depends on speed."""
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def served(folder: RunFolder, timeout_s: float = 600) -> AsyncIterator[AskService]:
    service = AskService(folder, Redactor(()), timeout_s)
    await service.start()
    try:
        yield service
    finally:
        await service.close()


def rpc(method: str, ident: Any = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


def message_of(response: httpx2.Response) -> Any:
    """The one JSON-RPC message of a response, as JSON or as an event stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        [data] = [line for line in response.text.splitlines() if line.startswith("data: ")]
        return json.loads(data.removeprefix("data: "))
    return response.json()


async def test_the_door(sc_folder: RunFolder) -> None:
    async with (
        served(sc_folder) as service,
        httpx2.AsyncClient(timeout=BOUND_S) as http,
    ):
        ping = rpc("ping")
        assert (await http.post(service.url, json=ping)).status_code == 401
        wrong = {"Authorization": "Bearer " + "x" * len(service.token)}
        assert (await http.post(service.url, json=ping, headers=wrong)).status_code == 401
        elsewhere = service.url.removesuffix("/mcp") + "/other"
        answer = await http.post(elsewhere, json=ping, headers=service.headers)
        assert answer.status_code == 404
        for method in ("GET", "DELETE", "PUT"):
            answer = await http.request(method, service.url, headers=service.headers)
            assert answer.status_code == 405, method
            assert answer.headers["allow"] == "POST"
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "x" * (2 * 1024 * 1024)}
        answer = await http.post(service.url, json=big, headers=service.headers)
        assert answer.status_code == 413
        answer = await http.post(service.url, json=ping, headers=service.headers)
        assert answer.status_code == 200
        assert answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_json_rpc_edges(sc_folder: RunFolder) -> None:
    async with (
        served(sc_folder) as service,
        httpx2.AsyncClient(headers={**service.headers, **ACCEPT}, timeout=BOUND_S) as http,
    ):

        async def post(body: Any) -> httpx2.Response:
            return await http.post(service.url, content=json.dumps(body).encode())

        for asked in (*PROTOCOL_VERSIONS, "1999-01-01", None):
            answer = message_of(await post(rpc("initialize", protocolVersion=asked)))
            offered = answer["result"]["protocolVersion"]
            assert offered == (asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1])
        notified = await post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert (notified.status_code, notified.content) == (202, b"")
        assert message_of(await post(rpc("nothing/here")))["error"]["code"] == -32601
        assert message_of(await post(rpc("tools/call", name="other")))["error"]["code"] == -32602
        assert message_of(await post([rpc("ping")]))["error"]["code"] == -32600
        garbage = await http.post(service.url, content=b"{not json")
        assert message_of(garbage)["error"]["code"] == -32700
        deep = await http.post(service.url, content=b"[" * 100_000)
        assert message_of(deep)["error"]["code"] in (-32700, -32600)
        listed = message_of(await post(rpc("tools/list", ident="a")))
        assert listed["id"] == "a"
        assert [tool["name"] for tool in listed["result"]["tools"]] == [TOOL_NAME]
        # Without an event stream in Accept the answer is plain JSON.
        plain = await http.post(
            service.url, json=rpc("ping", ident=7), headers={"Accept": "application/json"}
        )
        assert plain.headers["content-type"] == "application/json"
        assert plain.json()["id"] == 7


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=10), inner, max_size=4)
            ),
            max_leaves=12,
        ).map(lambda value: json.dumps(value).encode()),
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": st.integers() | st.text(max_size=5)},
            optional={
                "method": st.sampled_from(
                    ["initialize", "ping", "tools/list", "tools/call", "notifications/cancelled"]
                ),
                "params": st.none()
                | st.integers()
                | st.dictionaries(
                    st.sampled_from(["name", "arguments", "requestId", "protocolVersion"]),
                    st.none() | st.text(max_size=8) | st.integers() | st.just(TOOL_NAME),
                ),
            },
        ).map(lambda value: json.dumps(value).encode()),
    )
)
async def test_any_body_gets_an_answer_and_the_server_stays_up(
    sc_folder: RunFolder, body: bytes
) -> None:
    """No body ends the server or asks the owner anything malformed; a tools/call whose
    arguments are no question is refused as a tool error, never a question line."""
    async with (
        served(sc_folder) as service,
        httpx2.AsyncClient(headers={**service.headers, **ACCEPT}, timeout=BOUND_S) as http,
    ):
        answer = await http.post(service.url, content=body)
        assert answer.status_code in (200, 202)
        if answer.status_code == 200:
            message = message_of(answer)
            assert ("result" in message) != ("error" in message)
        after = await http.post(service.url, json=rpc("ping", ident="after"))
        assert message_of(after) == {"jsonrpc": "2.0", "id": "after", "result": {}}
    lines, problems, _ = sc_folder.progress()
    assert problems == []
    assert [line for line in lines if line.kind is ProgressKind.QUESTION] == []


async def test_closing_the_server_withdraws_a_waiting_question(sc_folder: RunFolder) -> None:
    question = {"question": "Which?", "options": ["a", "b"], "recommended": "a"}
    async with served(sc_folder) as service, httpx2.AsyncClient(timeout=BOUND_S) as http:
        call = asyncio.create_task(
            http.post(
                service.url,
                json=rpc("tools/call", name=TOOL_NAME, arguments=question),
                headers={**service.headers, **ACCEPT},
            )
        )
        async with asyncio.timeout(BOUND_S):
            while not sc_folder.progress()[0]:
                await asyncio.sleep(0.02)
        await service.close()
        with pytest.raises(httpx2.HTTPError):
            await call
    answers = [line.answer for line in sc_folder.progress()[0] if line.kind is ProgressKind.ANSWER]
    assert answers == [Answer("q1", "", ChosenBy.WITHDRAWN)]


async def test_a_client_that_hangs_up_withdraws_its_question(sc_folder: RunFolder) -> None:
    question = {"question": "Which?", "options": ["a", "b"], "recommended": "a"}
    async with served(sc_folder) as service:
        host, port = service.url.split("//")[1].split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        body = json.dumps(rpc("tools/call", name=TOOL_NAME, arguments=question)).encode()
        writer.write(
            b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {service.token}\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        async with asyncio.timeout(BOUND_S):
            while not sc_folder.progress()[0]:
                await asyncio.sleep(0.02)
        writer.close()
        async with asyncio.timeout(BOUND_S):
            while not [
                line for line in sc_folder.progress()[0] if line.kind is ProgressKind.ANSWER
            ]:
                await asyncio.sleep(0.02)
        del reader
    answers = [line.answer for line in sc_folder.progress()[0] if line.kind is ProgressKind.ANSWER]
    assert answers == [Answer("q1", "", ChosenBy.WITHDRAWN)]
