"""A scripted fake model server: the Anthropic Messages and OpenAI Responses APIs on loopback.

The engine tests, the demo and the benchmarks drive the real Claude Code and Codex CLIs against
it, so a clone can run whole turns, tool calls, interrupts and steering with no account. Each
model request is answered from a script of replies (`Text`, `Shell`, `CallTool`, `Hang`), in
order, or by a rule; every request is recorded so a test can check what reached the model.

    with FakeModelServer([Shell("echo hi > out.txt"), Text("Done.")]) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-fake"}
        ...
        assert server.saw_text("please also")

The wire formats follow what the pinned CLIs were seen to send and accept (docs/engines.md);
requests are parsed leniently because both CLIs add fields all the time.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import attrs

from shadowclone_testing.fakes.chatgpt import TOKEN_PATH, FakeChatgptLogin

log = logging.getLogger(__name__)

Api = Literal["anthropic", "openai"]

FAKE_MODEL = "shadowclone-fake-model"
"""A model name to give an engine that would otherwise pick one whose tools (Codex's default
turns on a JavaScript `exec` around the others) this server does not speak."""
KEEPALIVE_S = 0.5
"""How often a hanging reply writes a keepalive, so it notices a client that went away."""


# --------------------------------------------------------------------------- replies


@attrs.frozen
class Text:
    """A final answer: the turn ends after it (Anthropic `end_turn`, a Responses message).

    With `chunk_delay_s` the text streams word by word with that pause between deltas, so an
    interrupt or a steer can land while the reply is still streaming.
    """

    text: str
    chunk_delay_s: float = 0.0


@attrs.frozen
class Shell:
    """Run a shell command in the workspace: Claude's `Bash` tool, or whichever shell tool the
    Codex request advertises (`exec_command` on 0.171.0). `text` is said before the call."""

    command: str
    description: str = ""
    text: str = ""


@attrs.frozen
class CallTool:
    """Call tool `tool` of MCP server `server`: Claude's `mcp__<server>__<tool>`, or a Responses
    `function_call` in the namespace the Codex request advertises for that server."""

    server: str
    tool: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    text: str = ""


@attrs.frozen(eq=False)
class Hang:
    """Start a reply and hold it open until `release()` (or the client goes away, or the server
    closes); then finish it as `then`. For a model that is "thinking" when a test acts."""

    then: Text | Shell | CallTool = Text("Released.")
    _released: threading.Event = attrs.field(factory=threading.Event, alias="_released")

    def release(self) -> None:
        self._released.set()

    @property
    def released(self) -> bool:
        return self._released.is_set()


@attrs.frozen
class ApiError:
    """Answer the request with an API error instead of a reply (a 400 is not retried)."""

    message: str = "the fake model refuses this request"
    status: int = 400


@attrs.frozen
class UsageLimit:
    """Answer as a provider whose login has used up its plan: 429 with the time it resets, in
    each API's words (Anthropic's unified rate-limit headers; the Responses API's
    `usage_limit_reached` error)."""

    reset_in_s: float = 2.0


Reply = Text | Shell | CallTool | Hang | ApiError | UsageLimit
Rule = Callable[["ModelRequest"], "Reply | None"]


# --------------------------------------------------------------------------- requests


def _strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _text_blocks(content: object, kinds: Sequence[str]) -> list[str]:
    """The texts of a message's content: a plain string or a list of typed blocks."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") in kinds
        and isinstance(block.get("text"), str)
    ]


@attrs.frozen
class ModelRequest:
    """One HTTP request the server received, parsed as far as it parses."""

    index: int
    method: str
    path: str
    """Without the query string: `/v1/messages`, `/v1/responses`..."""
    query: Mapping[str, str]
    headers: Mapping[str, str]
    """Lower-case names."""
    body: Any
    """The parsed JSON body, or None."""

    @property
    def api(self) -> Api | None:
        """Which API this is a model call of, or None for anything else (count_tokens, GETs)."""
        if self.method != "POST":
            return None
        if self.path == "/v1/messages":
            return "anthropic"
        if self.path == "/v1/responses":
            return "openai"
        return None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, Mapping) and bool(self.body.get("stream", False))

    def _conversation(self) -> list[Any]:
        if not isinstance(self.body, Mapping):
            return []
        key = "messages" if self.api == "anthropic" else "input"
        items = self.body.get(key)
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        return list(items) if isinstance(items, list) else []

    def user_messages(self) -> list[list[str]]:
        """The text blocks of each user message, oldest first (tool results not included)."""
        kinds = ("text", "input_text")
        return [
            _text_blocks(item.get("content"), kinds)
            for item in self._conversation()
            if isinstance(item, Mapping)
            and item.get("role") == "user"
            and item.get("type", "message") == "message"
        ]

    def user_texts(self) -> list[str]:
        """Every user text block of the conversation, system reminders included."""
        return [text for message in self.user_messages() for text in message]

    def last_user_text(self) -> str | None:
        """The last text block of the last user message: the prompt, where system reminders and
        tool results come before it."""
        for message in reversed(self.user_messages()):
            if message:
                return message[-1]
        return None

    def contains(self, text: str) -> bool:
        """True if `text` occurs anywhere in the conversation: user texts, tool results, system
        reminders folded into them."""
        return any(text in string for string in _strings(self._conversation()))

    def tool_names(self) -> list[str]:
        """The tools the request offers; a Responses namespace lists as `<namespace>.<tool>`."""
        tools = self.body.get("tools") if isinstance(self.body, Mapping) else None
        names: list[str] = []
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, Mapping):
                continue
            if tool.get("type") == "namespace":
                inner = tool.get("tools")
                names.extend(
                    f"{tool.get('name')}.{sub.get('name')}"
                    for sub in (inner if isinstance(inner, list) else [])
                    if isinstance(sub, Mapping)
                )
            elif isinstance(tool.get("name"), str):
                names.append(tool["name"])
        return names

    def tool_results(self) -> list[str]:
        """The outputs of tool calls the client sent back (Anthropic `tool_result`, Responses
        `function_call_output`), oldest first."""
        results: list[str] = []
        for item in self._conversation():
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "function_call_output":
                results.append("".join(_strings(item.get("output"))))
            content = item.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    results.append("".join(_strings(block.get("content"))))
        return results


# --------------------------------------------------------------------------- rendering


def _chunks(text: str) -> list[str]:
    """Word-sized pieces of `text` that join back to it exactly."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [""]


def _mcp_name_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


class _Stream:
    """Writes one SSE response; stops quietly when the client hangs up."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._handler = handler
        self.sequence = itertools.count()

    def start(self) -> None:
        self._handler.send_response(HTTPStatus.OK)
        self._handler.send_header("Content-Type", "text/event-stream")
        self._handler.send_header("Cache-Control", "no-cache")
        self._handler.send_header("Connection", "close")
        self._handler.end_headers()
        self._handler.close_connection = True

    def event(self, data: Mapping[str, Any]) -> None:
        frame = f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"
        self._handler.wfile.write(frame.encode())
        self._handler.wfile.flush()

    def comment(self) -> None:
        self._handler.wfile.write(b": keepalive\n\n")
        self._handler.wfile.flush()


class _AnthropicWriter:
    """Renders replies as Messages API responses (docs/engines.md)."""

    def __init__(self, server: FakeModelServer, request: ModelRequest) -> None:
        self.server = server
        self.request = request
        self.model = str(request.body.get("model", "fake-model"))
        self.message_id = server.new_id("msg")

    def blocks(self, reply: Text | Shell | CallTool) -> tuple[list[dict[str, Any]], str]:
        """The content blocks and stop reason of a reply."""
        if isinstance(reply, Text):
            return [{"type": "text", "text": reply.text}], "end_turn"
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        if isinstance(reply, Shell):
            name = "Bash"
            arguments: Mapping[str, Any] = {
                "command": reply.command,
                "description": reply.description or reply.command[:60],
            }
        else:
            name = f"mcp__{_mcp_name_part(reply.server)}__{_mcp_name_part(reply.tool)}"
            arguments = reply.arguments
        blocks.append(
            {
                "type": "tool_use",
                "id": self.server.new_id("toolu"),
                "name": name,
                "input": dict(arguments),
            }
        )
        return blocks, "tool_use"

    def usage(self) -> dict[str, int]:
        return {"input_tokens": max(1, len(json.dumps(self.request.body)) // 4), "output_tokens": 1}

    def whole(self, reply: Text | Shell | CallTool) -> dict[str, Any]:
        blocks, stop_reason = self.blocks(reply)
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self.usage(),
        }

    def start(self, stream: _Stream) -> None:
        stream.start()
        message = self.whole(Text(""))
        message.update(content=[], stop_reason=None)
        stream.event({"type": "message_start", "message": message})

    def finish(self, stream: _Stream, reply: Text | Shell | CallTool) -> None:
        blocks, stop_reason = self.blocks(reply)
        delay = reply.chunk_delay_s if isinstance(reply, Text) else 0.0
        output_tokens = 0
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                stream.event(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                for number, piece in enumerate(_chunks(block["text"])):
                    if number and delay:
                        time.sleep(delay)
                    output_tokens += 1
                    stream.event(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        }
                    )
            else:
                stream.event(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    }
                )
                output_tokens += 1
                stream.event(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    }
                )
            stream.event({"type": "content_block_stop", "index": index})
        stream.event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": max(1, output_tokens)},
            }
        )
        stream.event({"type": "message_stop"})

    def keepalive(self, stream: _Stream) -> None:
        stream.event({"type": "ping"})


class ToolNotOffered(Exception):
    """The request offers no tool the scripted reply could call."""


class _ResponsesWriter:
    """Renders replies as Responses API results (docs/engines.md)."""

    SHELL_TOOLS: Mapping[str, Callable[[str], dict[str, Any]]] = {
        "exec_command": lambda command: {"cmd": command},
        "shell_command": lambda command: {"command": command},
        "shell": lambda command: {"command": ["bash", "-lc", command]},
    }

    def __init__(self, server: FakeModelServer, request: ModelRequest) -> None:
        self.server = server
        self.request = request
        self.response_id = server.new_id("resp")
        tools = request.body.get("tools")
        self.tools: list[Mapping[str, Any]] = [
            tool for tool in (tools if isinstance(tools, list) else []) if isinstance(tool, Mapping)
        ]

    def shell_call(self, command: str) -> dict[str, Any]:
        offered = {tool.get("name") for tool in self.tools if tool.get("type") == "function"}
        for name, arguments in self.SHELL_TOOLS.items():
            if name in offered:
                return {"name": name, "arguments": json.dumps(arguments(command))}
        raise ToolNotOffered(
            f"no shell tool among the request's tools: {sorted(map(str, offered))}"
        )

    def mcp_call(self, reply: CallTool) -> dict[str, Any]:
        namespace = f"mcp__{_mcp_name_part(reply.server)}"
        flat = f"{namespace}__{_mcp_name_part(reply.tool)}"
        arguments = json.dumps(dict(reply.arguments))
        for tool in self.tools:
            name = str(tool.get("name", ""))
            if tool.get("type") == "function" and name == flat:
                return {"name": name, "arguments": arguments}
            if tool.get("type") == "namespace" and name.rstrip("_") == namespace:
                return {"namespace": name, "name": reply.tool, "arguments": arguments}
        raise ToolNotOffered(
            f"no MCP server {reply.server!r} among the request's tools: {self.request.tool_names()}"
        )

    def items(self, reply: Text | Shell | CallTool) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        text = reply.text
        if text or isinstance(reply, Text):
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": self.server.new_id("msg"),
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        if isinstance(reply, Shell | CallTool):
            call = (
                self.shell_call(reply.command) if isinstance(reply, Shell) else self.mcp_call(reply)
            )
            items.append(
                {
                    "type": "function_call",
                    "id": self.server.new_id("fc"),
                    "call_id": self.server.new_id("call"),
                    "status": "completed",
                    **call,
                }
            )
        return items

    def usage(self) -> dict[str, Any]:
        input_tokens = max(1, len(json.dumps(self.request.body)) // 4)
        return {
            "input_tokens": input_tokens,
            "input_tokens_details": None,
            "output_tokens": 1,
            "output_tokens_details": None,
            "total_tokens": input_tokens + 1,
        }

    def response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "status": status,
            "model": str(self.request.body.get("model", "fake-model")),
            "output": output,
            "usage": self.usage() if status == "completed" else None,
        }

    def whole(self, reply: Text | Shell | CallTool) -> dict[str, Any]:
        return self.response("completed", self.items(reply))

    def send(self, stream: _Stream, data: dict[str, Any]) -> None:
        stream.event({**data, "sequence_number": next(stream.sequence)})

    def start(self, stream: _Stream) -> None:
        stream.start()
        self.send(
            stream,
            {"type": "response.created", "response": self.response("in_progress", [])},
        )

    def finish(self, stream: _Stream, reply: Text | Shell | CallTool) -> None:
        items = self.items(reply)
        delay = reply.chunk_delay_s if isinstance(reply, Text) else 0.0
        for index, item in enumerate(items):
            if item["type"] == "message":
                self.send(
                    stream,
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "status": "in_progress", "content": []},
                    },
                )
                for number, piece in enumerate(_chunks(item["content"][0]["text"])):
                    if number and delay:
                        time.sleep(delay)
                    self.send(
                        stream,
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": piece,
                        },
                    )
            self.send(
                stream, {"type": "response.output_item.done", "output_index": index, "item": item}
            )
        self.send(
            stream, {"type": "response.completed", "response": self.response("completed", items)}
        )

    def keepalive(self, stream: _Stream) -> None:
        stream.comment()


# --------------------------------------------------------------------------- server


class FakeModelServer:
    """A real HTTP server on `host` that answers model requests from a script.

    `script` is consumed one reply per model request, in order; `rule`, when given, is asked
    first and may answer a request itself (return a reply) or leave it to the script (None).
    When both have nothing left, the server answers `Text(final_text)`. Use it as a context
    manager, or call `start()` and `close()`.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        rule: Rule | None = None,
        final_text: str = "Done.",
        host: str = "127.0.0.1",
        port: int = 0,
        login: FakeChatgptLogin | None = None,
    ) -> None:
        self._script: list[Reply] = list(script)
        self.login = login
        """When given, model requests need its current access token (else 401), and the server
        is its token endpoint too (`token_url`)."""
        self.rule = rule
        """Asked before the script for each model request; may be set at any time."""
        self.final_text = final_text
        self._host = host
        self._port = port
        self._lock = threading.Condition()
        self._requests: list[ModelRequest] = []
        self._ids = itertools.count(1)
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeModelServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-model-server",
            daemon=True,
        )
        self._thread.start()
        log.debug("fake model server listening on %s", self.url)
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake model server is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for a client on this machine: the Anthropic base URL (ANTHROPIC_BASE_URL)."""
        return self.url_for("127.0.0.1")

    @property
    def openai_url(self) -> str:
        """Base URL of the Responses API (a Codex provider's `base_url`)."""
        return self.url_for("127.0.0.1") + "/v1"

    def url_for(self, host: str) -> str:
        """Base URL as seen from elsewhere (`host.docker.internal` for a container)."""
        return f"http://{host}:{self.port}"

    @property
    def token_url(self) -> str:
        """The token endpoint of the fake ChatGPT login (`login`)."""
        return self.url + TOKEN_PATH

    # ---- script

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies left in the script."""
        with self._lock:
            return len(self._script)

    def _next_reply(self, request: ModelRequest) -> Reply:
        rule = self.rule
        if rule is not None:
            reply = rule(request)
            if reply is not None:
                return reply
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return Text(self.final_text)

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._ids):04d}"

    # ---- what was received

    def _record(self, request: ModelRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def _next_index(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request received, in order of arrival."""
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[ModelRequest]:
        """The requests that asked a model for a reply (either API)."""
        return [request for request in self.requests if request.api is not None]

    def user_texts(self) -> list[str]:
        """Every distinct user text block the model was sent, in order of first appearance."""
        seen: dict[str, None] = {}
        for request in self.model_requests():
            seen.update(dict.fromkeys(request.user_texts()))
        return list(seen)

    def saw_text(self, text: str) -> bool:
        """True if any model request's conversation contains `text`."""
        return any(request.contains(text) for request in self.model_requests())

    def wait_for(
        self, predicate: Callable[[ModelRequest], bool], timeout: float = 30.0
    ) -> ModelRequest:
        """The first recorded model request that satisfies `predicate`, waiting for it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for request in self._requests:
                    if request.api is not None and predicate(request):
                        return request
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no matching model request within {timeout} s; "
                        f"{len(self._requests)} requests received"
                    )
                self._lock.wait(left)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[ModelRequest]:
        """Wait until at least `count` model requests have arrived; return them all."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(done := [r for r in self._requests if r.api is not None]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(done)} of {count} model requests within {timeout} s")
                self._lock.wait(left)
            return done

    def wait_for_text(self, text: str, timeout: float = 30.0) -> ModelRequest:
        """The first model request whose conversation contains `text`, waiting for it."""
        return self.wait_for(lambda request: request.contains(text), timeout)

    # ---- answering

    def answer(self, handler: _Handler, request: ModelRequest) -> None:
        writer: _AnthropicWriter | _ResponsesWriter
        writer = (
            _AnthropicWriter(self, request)
            if request.api == "anthropic"
            else _ResponsesWriter(self, request)
        )
        reply = self._next_reply(request)
        log.debug("request %d %s: answering %r", request.index, request.path, reply)
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
        if isinstance(reply, ApiError):
            kind = "invalid_request_error" if reply.status == 400 else "api_error"
            error = {"type": kind, "message": reply.message}
            handler.send_json(reply.status, {"type": "error", "error": error})
            return
        final = reply.then if isinstance(reply, Hang) else reply
        try:
            if not request.stream and not isinstance(reply, Hang):
                handler.send_json(HTTPStatus.OK, writer.whole(final))
                return
            # A reply that cannot be rendered (no such tool offered) must fail the request
            # before any byte is sent, as an error the test can read.
            if isinstance(writer, _ResponsesWriter):
                writer.items(final)
        except ToolNotOffered as error:
            log.error("request %d: %s", request.index, error)
            handler.send_json(HTTPStatus.BAD_REQUEST, {"error": {"message": str(error)}})
            return
        stream = _Stream(handler)
        writer.start(stream)
        if isinstance(reply, Hang):
            while not (reply.released or self._closing.wait(KEEPALIVE_S)):
                writer.keepalive(stream)
        writer.finish(stream, final)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake model server: " + format, *args)

    def send_json(
        self, status: int, data: object, headers: Mapping[str, str] | None = None
    ) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _record(self) -> ModelRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parts = urlsplit(self.path)
        request = ModelRequest(
            index=self.fake._next_index(),
            method=self.command,
            path=parts.path.rstrip("/") or "/",
            query={key: values[-1] for key, values in parse_qs(parts.query).items()},
            headers={key.lower(): value for key, value in self.headers.items()},
            body=body,
        )
        self.fake._record(request)
        return request

    def do_GET(self) -> None:
        request = self._record()
        if request.path == "/v1/models":
            self.send_json(HTTPStatus.OK, {"object": "list", "data": []})
        else:
            self._not_found(request)

    def do_POST(self) -> None:
        request = self._record()
        login = self.fake.login
        refused = (
            login is not None and request.api is not None and not login.accepts(request.headers)
        )
        try:
            if login is not None and request.path == TOKEN_PATH:
                self.send_json(*login.token_endpoint(request.body))
            elif refused:
                error = {"type": "authentication_error", "message": "expired or unknown token"}
                self.send_json(HTTPStatus.UNAUTHORIZED, {"type": "error", "error": error})
            elif request.api is not None and isinstance(request.body, Mapping):
                self.fake.answer(self, request)
            elif request.path == "/v1/messages/count_tokens":
                tokens = max(1, len(json.dumps(request.body)) // 4)
                self.send_json(HTTPStatus.OK, {"input_tokens": tokens})
            elif request.api is not None:
                self.send_json(
                    HTTPStatus.BAD_REQUEST,
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "bad JSON"},
                    },
                )
            else:
                self._not_found(request)
        except (BrokenPipeError, ConnectionResetError):
            # An interrupted turn: the CLI closed the stream mid-reply, as it should.
            log.debug("request %d: client closed the connection mid-reply", request.index)
            self.close_connection = True

    def _not_found(self, request: ModelRequest) -> None:
        self.send_json(
            HTTPStatus.NOT_FOUND,
            {"type": "error", "error": {"type": "not_found_error", "message": request.path}},
        )
