"""`initialize` is answered before the SDK is imported, with the SDK's own answer, and the
channel after it is the SDK's, untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from shadowclone.config import Paths
from shadowclone.mcp.early import early_answer

SDK_ONLY = [
    sys.executable,
    "-P",
    "-c",
    "from shadowclone.mcp.server import build_server; build_server().run('stdio')",
]
"""The SDK's server with nothing in front of it."""
SHADOWCLONE_MCP = [sys.executable, "-P", "-c", "from shadowclone.cli import entry; entry()", "mcp"]


def initialize(request_id: int | str, version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


def exchange(
    command: list[str], messages: Sequence[object], home: Paths, answers: int
) -> list[Any]:
    """Send the messages (a string as a raw line), read `answers` lines, then close stdin as
    a client does when it is done; `home` (the fixture's, in the environment) holds the
    config."""
    assert home.config_file.parent.is_dir()
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert server.stdin is not None and server.stdout is not None
    for message in messages:
        line = message if isinstance(message, str) else json.dumps(message)
        server.stdin.write(line.encode() + b"\n")
    server.stdin.flush()
    answered = [json.loads(server.stdout.readline()) for _ in range(answers)]
    server.stdin.close()
    assert server.wait(timeout=60) == 0
    assert server.stdout.read() == b""
    return answered


VERSIONS = [*HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01", "", "2025-06-18 "]


def test_the_early_answer_is_the_sdks_for_every_version(sc_home: Paths) -> None:
    requests = [initialize(number, version) for number, version in enumerate(VERSIONS)]
    requests.append(initialize("an-id", "2025-06-18"))
    answered = exchange(SDK_ONLY, list(requests), sc_home, len(requests))
    assert answered == [early_answer(request) for request in requests]


def test_the_sdk_serves_the_channel_after_the_early_answer(sc_home: Paths) -> None:
    """The client gets one answer to `initialize` (ours), then the SDK's to the rest; the
    SDK's own answer to `initialize` never reaches it."""
    answered = exchange(
        SHADOWCLONE_MCP,
        [
            initialize(7, "2025-06-18"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 9, "method": "no/such"},
        ],
        sc_home,
        3,
    )
    assert [message["id"] for message in answered] == [7, 8, 9]
    assert answered[0] == early_answer(initialize(7, "2025-06-18"))
    assert "start" in {tool["name"] for tool in answered[1]["result"]["tools"]}
    assert answered[2]["error"]["message"] == "Method not found"


def test_a_first_line_that_is_no_initialize_is_the_sdks_to_answer(sc_home: Paths) -> None:
    """Not JSON (which the SDK leaves unanswered), an `initialize` the SDK refuses, another
    request first: the client sees what the SDK alone would say."""
    bad_params = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    for first, answers in (("not json", 1), (bad_params, 2), (listing, 2)):
        messages = [first, initialize(3, "2025-06-18")]
        with_sdk_only = exchange(SDK_ONLY, messages, sc_home, answers)
        through_ours = exchange(SHADOWCLONE_MCP, messages, sc_home, answers)
        assert through_ours == with_sdk_only
        assert through_ours[-1] == early_answer(initialize(3, "2025-06-18"))


def test_a_client_that_closes_at_once_ends_the_server(sc_home: Paths) -> None:
    assert exchange(SHADOWCLONE_MCP, [], sc_home, 0) == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=16), children, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(["jsonrpc", "id", "method", "params", "protocolVersion", "clientInfo"])


@settings(max_examples=300)
@given(
    st.dictionaries(FIELDS, JSON | st.just("initialize"), max_size=4)
    | st.builds(initialize, st.integers() | st.text(max_size=8), st.text(max_size=12))
)
def test_any_first_message_gets_a_whole_answer_or_none(message: dict[str, Any]) -> None:
    answer = early_answer(message)
    if answer is not None:
        assert answer["id"] == message["id"] and answer["result"]["serverInfo"]["name"]
        assert answer["result"]["protocolVersion"] in HANDSHAKE_PROTOCOL_VERSIONS
