"""The `shadowclone_ask` MCP servers, driven by the MCP SDK's own client: the stdio server an
engine starts itself (on the SDK) and the run program's own (streamable HTTP, without the SDK),
each test over both where both apply."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    Answer,
    ChosenBy,
    InboxKind,
    InboxLine,
    ProgressKind,
    ProgressLine,
    Step,
    Via,
)
from shadowclone.redact import Redactor
from shadowclone.run.ask import SERVER_NAME, TOOL_NAME, ask_command
from shadowclone.run.ask.http import AskService
from shadowclone.run.progress import AskRelay, ProgressWriter

pytestmark = pytest.mark.anyio

BOUND_S = 30.0
"""A generous bound that turns a hang into a failure; no test depends on speed."""


@asynccontextmanager
async def stdio_server(
    folder: RunFolder, timeout_s: float, outbox: Path | None = None, cwd: Path | None = None
) -> AsyncIterator[Client]:
    """The real server, started from the very argv an engine gets as `EngineTask.ask_command`."""
    argv = ask_command(folder.path, timeout_s, outbox)
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), cwd=cwd)
    async with Client(params) as client:
        yield client


@asynccontextmanager
async def http_server(folder: RunFolder, timeout_s: float) -> AsyncIterator[Client]:
    """The run program's server, at the URL and with the headers an engine gets."""
    service = AskService(folder, Redactor(()), timeout_s)
    await service.start()
    try:
        async with (
            httpx2.AsyncClient(headers=service.headers, timeout=BOUND_S) as http,
            Client(streamable_http_client(service.url, http_client=http)) as client,
        ):
            yield client
    finally:
        await service.close()


@pytest.fixture(params=["stdio", "http"])
def ask_server(request: pytest.FixtureRequest) -> Callable[[RunFolder, float], Any]:
    """Either server, as a context manager of a connected client."""
    return stdio_server if request.param == "stdio" else http_server


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def lines_of(folder: RunFolder, kind: ProgressKind) -> list[ProgressLine]:
    lines, problems, _ = folder.progress()
    assert problems == []
    return [line for line in lines if line.kind is kind]


async def question_line(folder: RunFolder, number: int) -> ProgressLine:
    """Wait until the server has written its `number`th question line."""
    async with asyncio.timeout(BOUND_S):
        while len(questions := lines_of(folder, ProgressKind.QUESTION)) < number:
            await asyncio.sleep(0.05)
    return questions[number - 1]


def deliver(folder: RunFolder, line: InboxLine) -> None:
    """What serve does with the owner's answer: append it to the deliveries file."""
    files.append_line(folder.deliveries_file, schemas.dumps(line))


async def test_the_owners_answer_is_returned_and_recorded(
    sc_folder: RunFolder, ask_server: Callable[[RunFolder, float], Any]
) -> None:
    async with ask_server(sc_folder, 600) as client:
        call = asyncio.ensure_future(
            client.call_tool(
                TOOL_NAME,
                {
                    "question": "Drop the old migrations?",
                    "options": ["keep them", "drop them"],
                    "recommended": "keep them",
                },
            )
        )
        asked = await question_line(sc_folder, 1)
        assert asked.question is not None
        assert asked.question.id == "q1"
        assert asked.question.options == ("keep them", "drop them")
        assert asked.question.recommended == "keep them"
        assert asked.question.timeout_s == 600
        # Lines for other questions and messages are not this question's answer.
        deliver(sc_folder, InboxLine(id="i1", kind=InboxKind.MESSAGE, text="hello"))
        deliver(sc_folder, InboxLine(id="i2", kind=InboxKind.ANSWER, text="x", question_id="q9"))
        await asyncio.sleep(0.3)
        assert not call.done()
        deliver(
            sc_folder,
            InboxLine(
                id="i3",
                kind=InboxKind.ANSWER,
                text="drop them",
                question_id="q1",
                via=Via.DASHBOARD,
            ),
        )
        result = await asyncio.wait_for(call, BOUND_S)
    assert not result.is_error
    assert "drop them" in text_of(result)
    [answered] = lines_of(sc_folder, ProgressKind.ANSWER)
    assert answered.answer is not None
    assert answered.answer.question_id == "q1"
    assert answered.answer.choice == "drop them"
    assert answered.answer.chosen_by is ChosenBy.OWNER
    assert answered.answer.via is Via.DASHBOARD  # the record says how the owner answered


async def test_after_the_wait_limit_the_recommended_option_is_taken(
    sc_folder: RunFolder, ask_server: Callable[[RunFolder, float], Any]
) -> None:
    arguments = {"question": "Which name?", "options": ["foo", "bar"], "recommended": "bar"}
    async with ask_server(sc_folder, 1) as client:
        first = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), BOUND_S)
        second = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), BOUND_S)
    for result in (first, second):
        assert not result.is_error
        said = text_of(result)
        assert "did not answer" in said
        assert "bar" in said
        assert "skip every destructive step" in said
    questions = lines_of(sc_folder, ProgressKind.QUESTION)
    assert [line.question.id for line in questions if line.question] == ["q1", "q2"]
    answers = [line.answer for line in lines_of(sc_folder, ProgressKind.ANSWER)]
    assert [(a.question_id, a.choice, a.chosen_by) for a in answers if a] == [
        ("q1", "bar", ChosenBy.TIMEOUT),
        ("q2", "bar", ChosenBy.TIMEOUT),
    ]
    raw = [json.loads(line) for line in sc_folder.progress_file.read_text().splitlines()]
    assert [line["answer"]["chosen_by"] for line in raw if line["kind"] == "answer"] == [
        "timeout",
        "timeout",
    ]


MALFORMED: list[dict[str, Any]] = [
    {"question": "Which?", "options": ["a", "b"], "recommended": "c"},
    {"question": "Which?", "options": ["a"], "recommended": "a"},
    {"question": "Which?", "options": ["a", "a"], "recommended": "a"},
    {"question": "Which?", "options": ["a", ""], "recommended": "a"},
    {"question": " ", "options": ["a", "b"], "recommended": "a"},
    {"question": "Which?", "options": "a, b", "recommended": "a"},
    {"question": 7, "options": ["a", "b"], "recommended": "a"},
    {"question": "Which?", "options": ["a", 2], "recommended": "a"},
    {"question": "Which?", "options": ["a", "b"]},
    {},
]


async def test_one_described_tool_that_refuses_a_malformed_question(
    sc_folder: RunFolder, ask_server: Callable[[RunFolder, float], Any]
) -> None:
    async with ask_server(sc_folder, 600) as client:
        assert client.server_info is not None
        assert client.server_info.name == SERVER_NAME
        tools = (await client.list_tools()).tools
        results = [
            await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), BOUND_S)
            for arguments in MALFORMED
        ]
    assert [tool.name for tool in tools] == [TOOL_NAME]
    schema = tools[0].input_schema
    assert sorted(schema["required"]) == ["options", "question", "recommended"]
    assert schema["properties"]["options"]["type"] == "array"
    assert schema["properties"]["options"]["items"] == {"type": "string"}
    assert "recommended" in (tools[0].description or "")
    assert "10 minutes" in (tools[0].description or "")
    assert tools[0].annotations is not None
    assert tools[0].annotations.read_only_hint is True
    for arguments, result in zip(MALFORMED, results, strict=True):
        assert result.is_error, arguments
    assert "not one of the options" in text_of(results[0])
    assert lines_of(sc_folder, ProgressKind.QUESTION) == []


async def test_the_two_servers_describe_the_same_tool(sc_folder: RunFolder) -> None:
    """What the SDK derives from the stdio server's annotated parameters is what the run
    program's server writes out by hand."""
    async with stdio_server(sc_folder, 600) as stdio, http_server(sc_folder, 600) as http:
        [by_sdk] = (await stdio.list_tools()).tools
        [by_hand] = (await http.list_tools()).tools
        expected = by_sdk.model_dump(exclude_none=True)
        del expected["input_schema"]["title"]  # the SDK's name for its arguments model
        assert by_hand.model_dump(exclude_none=True) == expected
        assert http.server_info is not None
        assert stdio.server_info is not None
        assert http.server_info.name == stdio.server_info.name


async def test_a_workspaces_own_mcp_package_is_not_imported(
    sc_folder: RunFolder, tmp_path: Path
) -> None:
    """Engines start the stdio server in the workspace: a repository's own `mcp` package must
    not be imported in place of the SDK."""
    workspace = tmp_path / "workspace"
    (workspace / "mcp").mkdir(parents=True)
    (workspace / "mcp" / "__init__.py").write_text("raise SystemExit('the workspace ran')\n")
    async with stdio_server(sc_folder, 600, cwd=workspace) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == [TOOL_NAME]


async def test_lines_go_to_the_outbox_and_the_relay_masks_the_secrets(
    sc_folder: RunFolder, tmp_path: Path
) -> None:
    """The server runs as the engine, which holds no secret: it writes its lines to an outbox
    of the engine's, and the run program's relay masks every secret's value on the way to the
    progress file; questions and answers alone get through."""
    outbox = tmp_path / "engine" / "asks.jsonl"
    question = "May I print plain-looking-secret-42 in the log?"
    arguments = {"question": question, "options": ["yes", "no"], "recommended": "no"}
    async with stdio_server(sc_folder, 0.5, outbox) as client:
        result = await asyncio.wait_for(client.call_tool(TOOL_NAME, arguments), BOUND_S)
    assert not result.is_error
    assert not sc_folder.progress_file.exists()
    forged = ProgressLine(step=Step.FINISH, kind=ProgressKind.FINAL, text="clone done")
    files.append_line(outbox, schemas.dumps(forged))
    relay = AskRelay(outbox, ProgressWriter(sc_folder, Redactor(["plain-looking-secret-42"])))
    assert relay.pass_once() == 2
    assert relay.pass_once() == 0
    written = sc_folder.progress_file.read_text()
    assert "plain-looking-secret-42" not in written
    asked = await question_line(sc_folder, 1)
    assert asked.text == "May I print [redacted] in the log?"
    assert not lines_of(sc_folder, ProgressKind.FINAL)


async def test_a_call_the_engine_abandons_is_settled_as_withdrawn(
    sc_folder: RunFolder, ask_server: Callable[[RunFolder, float], Any]
) -> None:
    arguments = {"question": "Which?", "options": ["a", "b"], "recommended": "a"}
    async with ask_server(sc_folder, 600) as client:
        call = asyncio.ensure_future(client.call_tool(TOOL_NAME, arguments))
        await question_line(sc_folder, 1)
        call.cancel()
        async with asyncio.timeout(BOUND_S):
            while not lines_of(sc_folder, ProgressKind.ANSWER):
                await asyncio.sleep(0.05)
    [settled] = lines_of(sc_folder, ProgressKind.ANSWER)
    assert settled.answer == Answer("q1", "", ChosenBy.WITHDRAWN)


async def test_an_engine_connecting_before_the_http_server_serves_is_answered(
    sc_folder: RunFolder,
) -> None:
    """The run program hands the engine the URL as soon as the port listens; the engine's
    connection waits for the server to import and serve, and a request without the clone's
    token is refused."""
    service = AskService(sc_folder, Redactor(()), timeout_s=5)
    url = service.listen()
    try:
        async with httpx2.AsyncClient(headers=service.headers, timeout=BOUND_S) as http:
            connecting = asyncio.create_task(_tool_names(url, http))
            await asyncio.sleep(0.2)  # the engine's first request now waits in the backlog
            assert not connecting.done()
            await service.start()
            assert await asyncio.wait_for(connecting, BOUND_S) == [TOOL_NAME]
        async with httpx2.AsyncClient(timeout=BOUND_S) as stranger:
            refused = await stranger.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
    finally:
        await service.close()


async def _tool_names(url: str, http: httpx2.AsyncClient) -> list[str]:
    async with Client(streamable_http_client(url, http_client=http)) as client:
        return [tool.name for tool in (await client.list_tools()).tools]
