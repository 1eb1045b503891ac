"""The fake model server over real HTTP: both APIs, streamed and whole, and what it records."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from shadowclone_testing.fakes.models import (
    CallTool,
    FakeModelServer,
    Hang,
    ModelRequest,
    Shell,
    Text,
)

# The tool lists the pinned Codex sends, cut down to what the server reads (docs/engines.md).
CODEX_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "parameters": {}},
    {"type": "function", "name": "write_stdin", "parameters": {}},
    {"type": "namespace", "name": "mcp__shadowclone_ask", "tools": [{"name": "ask"}]},
]


REMINDER = "<system-reminder>The user sent a new message: steer me</system-reminder>"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def post(
    server: FakeModelServer, path: str, body: object, headers: dict[str, str] | None = None
) -> tuple[int, str, bytes]:
    """One POST: status, content type, body bytes."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def sse(payload: bytes) -> list[dict[str, Any]]:
    """The data of each SSE frame, checking that each frame's event name matches its type."""
    events = []
    for frame in payload.decode().split("\n\n"):
        lines = frame.strip().splitlines()
        if not lines or all(line.startswith(":") for line in lines):
            continue
        fields = dict(line.split(": ", 1) for line in lines if not line.startswith(":"))
        data = json.loads(fields["data"])
        assert fields["event"] == data["type"]
        events.append(data)
    return events


def anthropic_body(text: str, *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 32000,
        "stream": stream,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\nctx\n</system-reminder>"},
                    {"type": "text", "text": text},
                ],
            }
        ],
        **extra,
    }


def responses_body(text: str, *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": "mock-model",
        "stream": stream,
        "tools": CODEX_TOOLS,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "dev"}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        ],
    }


def anthropic_message(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Reassemble a streamed Messages reply the way a client does."""
    message: dict[str, Any] = events[0]["message"]
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    partial_json: dict[int, str] = {}
    for event in events[1:]:
        if event["type"] == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            block = message["content"][event["index"]]
            delta = event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                partial_json[event["index"]] = (
                    partial_json.get(event["index"], "") + delta["partial_json"]
                )
        elif event["type"] == "message_delta":
            message["stop_reason"] = event["delta"]["stop_reason"]
    for index, text in partial_json.items():
        message["content"][index]["input"] = json.loads(text)
    return message


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_stream_answers_text_then_tool_then_final_text(server: FakeModelServer) -> None:
    server.add(Text("Hello there, owner."), Shell("echo hi > out.txt", text="Writing."))

    status, content_type, payload = post(server, "/v1/messages?beta=true", anthropic_body("hi"))
    assert status == 200
    assert content_type == "text/event-stream"
    message = anthropic_message(sse(payload))
    assert message["content"] == [{"type": "text", "text": "Hello there, owner."}]
    assert message["stop_reason"] == "end_turn"
    assert message["model"] == "claude-test"

    message = anthropic_message(sse(post(server, "/v1/messages", anthropic_body("go"))[2]))
    assert message["stop_reason"] == "tool_use"
    assert message["content"][0] == {"type": "text", "text": "Writing."}
    tool_use = message["content"][1]
    assert tool_use["name"] == "Bash"
    assert tool_use["input"]["command"] == "echo hi > out.txt"
    assert tool_use["id"].startswith("toolu_")

    # The script is used up: a short final text.
    message = anthropic_message(sse(post(server, "/v1/messages", anthropic_body("more"))[2]))
    assert message["content"] == [{"type": "text", "text": server.final_text}]


def test_anthropic_mcp_tool_call_uses_the_server_and_tool_name(server: FakeModelServer) -> None:
    server.add(CallTool("shadowclone_ask", "ask", {"question": "Which?", "options": ["a", "b"]}))

    message = anthropic_message(sse(post(server, "/v1/messages", anthropic_body("ask me"))[2]))

    assert message["content"][0]["name"] == "mcp__shadowclone_ask__ask"
    assert message["content"][0]["input"] == {"question": "Which?", "options": ["a", "b"]}


def test_anthropic_without_stream_answers_one_json_message(server: FakeModelServer) -> None:
    server.add(Shell("ls"))

    status, content_type, payload = post(
        server, "/v1/messages?beta=true", anthropic_body("x", stream=False)
    )

    assert (status, content_type) == (200, "application/json")
    message = json.loads(payload)
    assert message["type"] == "message"
    assert message["stop_reason"] == "tool_use"
    assert message["content"][0]["input"]["command"] == "ls"


def test_count_tokens_and_unknown_paths(server: FakeModelServer) -> None:
    server.add(Text("kept for the model call"))

    status, _, payload = post(server, "/v1/messages/count_tokens?beta=true", anthropic_body("x"))
    assert status == 200
    assert json.loads(payload)["input_tokens"] > 0

    assert post(server, "/v1/complete", {})[0] == 404
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/v1/models")
    assert json.loads(connection.getresponse().read())["data"] == []
    connection.close()

    # None of these used a scripted reply or counts as a model request.
    assert server.remaining == 1
    assert server.model_requests() == []
    assert [request.path for request in server.requests] == [
        "/v1/messages/count_tokens",
        "/v1/complete",
        "/v1/models",
    ]


def test_records_headers_query_and_user_texts(server: FakeModelServer) -> None:
    post(server, "/v1/messages?beta=true", anthropic_body("first prompt"), {"x-api-key": "sk-fake"})
    body = anthropic_body("second prompt")
    body["messages"][0:0] = [
        {"role": "user", "content": "earlier"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": f"output\n{REMINDER}",
                }
            ],
        },
    ]
    post(server, "/v1/messages?beta=true", body)

    first, second = server.model_requests()
    assert first.headers["x-api-key"] == "sk-fake"
    assert first.query == {"beta": "true"}
    assert first.api == "anthropic"
    assert first.last_user_text() == "first prompt"
    assert second.last_user_text() == "second prompt"
    assert second.tool_results() == [f"output\n{REMINDER}"]
    assert "earlier" in second.user_texts()
    assert "steer me" not in " ".join(second.user_texts())
    assert server.saw_text("steer me")
    assert not server.saw_text("never said")
    assert server.user_texts()[0] == "<system-reminder>\nctx\n</system-reminder>"
    assert "first prompt" in server.user_texts()


def test_a_rule_answers_before_the_script(server: FakeModelServer) -> None:
    def rule(request: ModelRequest) -> Text | None:
        return Text("ack") if request.last_user_text() == "ping" else None

    with FakeModelServer([Text("scripted")], rule=rule) as ruled:
        pinged = anthropic_message(sse(post(ruled, "/v1/messages", anthropic_body("ping"))[2]))
        other = anthropic_message(sse(post(ruled, "/v1/messages", anthropic_body("other"))[2]))

    assert pinged["content"][0]["text"] == "ack"
    assert other["content"][0]["text"] == "scripted"


def test_slow_text_streams_in_word_deltas(server: FakeModelServer) -> None:
    server.add(Text("one two three four", chunk_delay_s=0.01))

    events = sse(post(server, "/v1/messages", anthropic_body("x"))[2])

    deltas = [event["delta"]["text"] for event in events if event["type"] == "content_block_delta"]
    assert len(deltas) == 4
    assert "".join(deltas) == "one two three four"


def test_hang_holds_the_reply_until_released(server: FakeModelServer) -> None:
    hang = Hang(then=Text("after the wait"))
    server.add(hang)
    result: list[bytes] = []
    client = threading.Thread(
        target=lambda: result.append(post(server, "/v1/messages", anthropic_body("x"))[2])
    )
    client.start()

    server.wait_for_requests(1, timeout=10)
    client.join(timeout=1.5)
    assert client.is_alive(), "the reply finished before it was released"
    hang.release()
    client.join(timeout=10)

    events = sse(result[0])
    assert any(event["type"] == "ping" for event in events)
    assert anthropic_message(events)["content"][0]["text"] == "after the wait"


def test_wait_for_gives_up_with_a_timeout(server: FakeModelServer) -> None:
    with pytest.raises(TimeoutError):
        server.wait_for_text("never", timeout=0.2)


# --------------------------------------------------------------------------- Responses


def test_responses_stream_final_text(server: FakeModelServer) -> None:
    server.add(Text("Done here"))

    status, content_type, payload = post(server, "/v1/responses", responses_body("do it"))

    assert (status, content_type) == (200, "text/event-stream")
    events = sse(payload)
    kinds = [event["type"] for event in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "Done here"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["content"][0] == {"type": "output_text", "text": "Done here", "annotations": []}
    assert events[-1]["response"]["usage"]["total_tokens"] > 0
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_responses_shell_calls_the_advertised_shell_tool(server: FakeModelServer) -> None:
    server.add(Shell("echo hi > out.txt"))

    events = sse(post(server, "/v1/responses", responses_body("go"))[2])

    calls = [
        e["item"]
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    assert len(calls) == 1
    assert calls[0]["name"] == "exec_command"
    assert json.loads(calls[0]["arguments"]) == {"cmd": "echo hi > out.txt"}
    assert calls[0]["call_id"].startswith("call_")


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("shell_command", {"command": "ls"}),
        ("shell", {"command": ["bash", "-lc", "ls"]}),
    ],
)
def test_responses_shell_follows_older_tool_names(
    server: FakeModelServer, tool: str, arguments: dict[str, Any]
) -> None:
    server.add(Shell("ls"))
    body = responses_body("go")
    body["tools"] = [{"type": "function", "name": tool, "parameters": {}}]

    events = sse(post(server, "/v1/responses", body)[2])

    call = next(e["item"] for e in events if e["type"] == "response.output_item.done")
    assert (call["name"], json.loads(call["arguments"])) == (tool, arguments)


def test_responses_mcp_call_echoes_the_namespace(server: FakeModelServer) -> None:
    server.add(CallTool("shadowclone_ask", "ask", {"question": "Q?"}, text="Asking."))

    events = sse(post(server, "/v1/responses", responses_body("go"))[2])

    items = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert items[0]["type"] == "message"
    assert items[1]["namespace"] == "mcp__shadowclone_ask"
    assert items[1]["name"] == "ask"
    assert json.loads(items[1]["arguments"]) == {"question": "Q?"}


def test_responses_tool_not_offered_is_a_clear_error(server: FakeModelServer) -> None:
    server.add(CallTool("elsewhere", "thing"))

    status, _, payload = post(server, "/v1/responses", responses_body("go"))

    assert status == 400
    assert "elsewhere" in json.loads(payload)["error"]["message"]


def test_responses_without_stream_and_recorded_texts(server: FakeModelServer) -> None:
    server.add(Shell("pwd"))

    status, _, payload = post(server, "/v1/responses", responses_body("steer: focus", stream=False))

    assert status == 200
    response = json.loads(payload)
    assert response["status"] == "completed"
    assert json.loads(response["output"][0]["arguments"]) == {"cmd": "pwd"}
    (request,) = server.model_requests()
    assert request.api == "openai"
    assert request.last_user_text() == "steer: focus"
    assert request.user_texts() == ["steer: focus"]  # the developer message is not the user's
    assert "mcp__shadowclone_ask.ask" in request.tool_names()
    assert server.wait_for_text("focus", timeout=1) is request


def test_function_call_output_counts_as_a_tool_result(server: FakeModelServer) -> None:
    body = responses_body("go")
    body["input"] += [
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 0"},
    ]
    post(server, "/v1/responses", body)

    (request,) = server.model_requests()
    assert request.tool_results() == ["Process exited with code 0"]
    assert request.last_user_text() == "go"


def test_listens_on_a_chosen_host() -> None:
    with FakeModelServer(host="0.0.0.0") as server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert server.url_for("host.docker.internal").endswith(f":{server.port}")
        assert post(server, "/v1/messages", anthropic_body("x"))[0] == 200
