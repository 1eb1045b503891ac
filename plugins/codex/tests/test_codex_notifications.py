"""Codex app-server notifications normalized into engine events, from a recorded real transcript,
and the driver's answers to Codex's own requests.

The transcript (data/codex-0.171.0.jsonl) comes from `record_codex_transcript`: five turns of
one session, both directions of the wire. The scenario suite in test_codex.py drives the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shadowclone.plugin import (
    EngineEvent,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
    arguments_detail,
)

from shadowclone_codex.notifications import (
    REFUSED_INPUT,
    NotificationNormalizer,
    answer_server_request,
    command_detail,
    describe,
    turn_error,
)

TRANSCRIPT = Path(__file__).with_name("data") / "codex-0.171.0.jsonl"


def transcript() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TRANSCRIPT.read_text().splitlines()]


def from_codex() -> list[dict[str, Any]]:
    """What the app-server wrote: responses, notifications and its own requests."""
    return [line["msg"] for line in transcript() if line["dir"] == "in"]


def notifications(method: str | None = None) -> list[dict[str, Any]]:
    return [
        message
        for message in from_codex()
        if "method" in message and "id" not in message and method in (None, message["method"])
    ]


def normalized() -> list[EngineEvent]:
    normalizer = NotificationNormalizer()
    return [
        event
        for message in notifications()
        for event in normalizer.events(message["method"], message.get("params") or {})
    ]


def test_transcript_normalizes_to_the_turns_it_holds() -> None:
    without_usage = [event for event in normalized() if not isinstance(event, UsageEvent)]

    assert without_usage == [
        TextEvent("Writing the file."),
        ToolUseEvent("shell", "echo hello > out.txt"),
        TextEvent("Wrote out.txt."),
        TurnEndedEvent(interrupted=False),
        ToolUseEvent("mcp__shadowclone_ask__ask", "Squash the commits?"),
        TextEvent("The owner would rather not squash."),
        TurnEndedEvent(interrupted=False),
        # The owner's message steered this turn: no turn ended before the model answered it.
        ToolUseEvent("shell", "echo started && sleep 3.5 && echo over"),
        TextEvent("Stopped the job, as asked."),
        TurnEndedEvent(interrupted=False),
        # A failed turn (the fake server refused the request) still ends as a turn.
        TurnEndedEvent(interrupted=False),
        ToolUseEvent("shell", "echo started && sleep 985.5 && echo over"),
        TurnEndedEvent(interrupted=True),
    ]


def test_each_turn_reports_its_own_tokens_and_they_add_up_to_the_thread() -> None:
    usages = [event for event in normalized() if isinstance(event, UsageEvent)]
    completed = notifications("turn/completed")
    totals = notifications("thread/tokenUsage/updated")

    assert len(usages) == len(completed) == 5
    final = totals[-1]["params"]["tokenUsage"]["total"]
    assert sum(usage.input_tokens for usage in usages) == final["inputTokens"]
    assert sum(usage.output_tokens for usage in usages) == final["outputTokens"]
    statuses = [message["params"]["turn"]["status"] for message in completed]
    assert statuses == ["completed", "completed", "completed", "failed", "interrupted"]
    for usage, status in zip(usages, statuses, strict=True):
        # A failed turn never got a model response, so it used no tokens.
        assert (usage.input_tokens > 0) == (status != "failed")
        assert usage.cost_usd is None  # Codex reports tokens, never a price


def test_the_steered_message_is_a_user_message_of_the_same_turn() -> None:
    steer = next(
        line["msg"]
        for line in transcript()
        if line["dir"] == "out" and line["msg"].get("method") == "turn/steer"
    )
    answer = next(message for message in from_codex() if message.get("id") == steer["id"])
    shown = [
        message["params"]
        for message in notifications("item/completed")
        if message["params"]["item"]["type"] == "userMessage"
        and message["params"]["item"].get("clientId") == steer["params"]["clientUserMessageId"]
    ]

    assert answer["result"] == {"turnId": steer["params"]["expectedTurnId"]}
    (item,) = shown
    assert item["turnId"] == steer["params"]["expectedTurnId"]
    assert item["item"]["content"][0]["text"] == "Owner says: stop that job."


def test_a_failed_turn_carries_its_error() -> None:
    (failed,) = [
        message["params"]
        for message in notifications("turn/completed")
        if message["params"]["turn"]["status"] == "failed"
    ]
    (error,) = notifications("error")

    assert "no_such_server" in turn_error(failed)
    assert turn_error(error["params"]) == turn_error(failed)
    assert error["params"]["willRetry"] is False


def test_other_notifications_give_no_events() -> None:
    normalizer = NotificationNormalizer()
    kinds = {"turn/completed", "item/started", "item/completed"}
    others = [message for message in notifications() if message["method"] not in kinds]

    assert {message["method"] for message in others} >= {
        "thread/started",
        "turn/started",
        "mcpServer/startupStatus/updated",
        "thread/tokenUsage/updated",
        "warning",
        "error",
    }
    assert [normalizer.events(m["method"], m.get("params") or {}) for m in others] == [
        [] for _ in others
    ]


def test_the_driver_opted_out_of_the_notifications_it_never_uses() -> None:
    methods = {message["method"] for message in notifications()}

    assert not methods & {"item/agentMessage/delta", "account/rateLimits/updated"}


def test_user_messages_reasoning_and_blank_text_are_not_events() -> None:
    normalizer = NotificationNormalizer()
    items: list[dict[str, Any]] = [
        {"type": "userMessage", "id": "u", "content": [{"type": "text", "text": "hi"}]},
        {"type": "reasoning", "id": "r", "summary": ["thinking"], "content": []},
        {"type": "agentMessage", "id": "a", "text": "  \n"},
        {"type": "plan", "id": "p", "text": "1. do it"},
    ]
    for item in items:
        for method in ("item/started", "item/completed"):
            assert normalizer.events(method, {"item": item}) == []


@pytest.mark.parametrize(
    ("item", "event"),
    [
        (
            {"type": "fileChange", "changes": [{"path": "a.py"}, {"path": "b/c.py"}]},
            ToolUseEvent("edit", "a.py, b/c.py"),
        ),
        (
            {"type": "webSearch", "query": "pluggy hookspec"},
            ToolUseEvent("web_search", "pluggy hookspec"),
        ),
        (
            {"type": "dynamicToolCall", "tool": "lookup", "arguments": {"path": "x"}},
            ToolUseEvent("lookup", "x"),
        ),
        (
            {"type": "commandExecution", "command": "/bin/bash -lc 'ls'", "commandActions": []},
            ToolUseEvent("shell", "/bin/bash -lc 'ls'"),
        ),
    ],
)
def test_tool_items_become_tool_use_when_they_start(
    item: dict[str, Any], event: ToolUseEvent
) -> None:
    assert NotificationNormalizer().events("item/started", {"item": item}) == [event]


def test_command_detail_prefers_the_models_own_command() -> None:
    item = {
        "command": "/bin/bash -lc 'echo a && echo b'",
        "commandActions": [{"type": "unknown", "command": "echo a && echo b"}],
    }

    assert command_detail(item) == "echo a && echo b"


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        ({"question": "Squash?", "options": ["y", "n"]}, "Squash?"),
        ('{"path": "src/a.py"}', "src/a.py"),
        ("not json at all", "not json at all"),
        ({"a": 1}, '{"a": 1}'),
        ({}, ""),
        (None, ""),
        ({"question": "x" * 500}, "x" * 199 + "…"),
    ],
)
def test_arguments_detail_is_one_short_line(arguments: object, detail: str) -> None:
    assert arguments_detail(arguments) == detail


def test_the_output_tail_reads_as_what_happened() -> None:
    lines = [line for message in from_codex() if (line := describe(message)) is not None]

    assert "MCP server shadowclone_ask: ready" in lines
    assert "item/started shell: echo hello > out.txt" in lines
    assert "item/completed mcp__shadowclone_ask__ask: Squash the commits? [completed]" in lines
    assert "item/completed userMessage: Owner says: stop that job." in lines
    assert any(line.startswith("turn/completed failed: ") for line in lines)
    assert lines[-1] == "turn/completed interrupted"
    assert all(len(line) <= 300 and "\n" not in line for line in lines)
    # Token counts and read markers say nothing about why a session ended.
    assert not any(line.startswith("thread/tokenUsage") for line in lines)


# --------------------------------------------------------------------------- Codex's requests


@pytest.mark.parametrize(
    ("method", "params", "answer"),
    [
        (
            "item/commandExecution/requestApproval",
            {"command": "rm -rf build", "availableDecisions": ["accept", "cancel"]},
            {"decision": "accept"},
        ),
        ("item/fileChange/requestApproval", {"reason": "write"}, {"decision": "accept"}),
        ("execCommandApproval", {"command": ["ls"]}, {"decision": "approved"}),
        ("applyPatchApproval", {}, {"decision": "approved"}),
        (
            "mcpServer/elicitation/request",
            {"mode": "form", "message": "Allow ask?", "requestedSchema": {"type": "object"}},
            {"action": "accept", "content": {}, "_meta": None},
        ),
        (
            "mcpServer/elicitation/request",
            {"mode": "url", "message": "Log in", "url": "https://x.invalid"},
            {"action": "accept", "content": None, "_meta": None},
        ),
        (
            "item/permissions/requestApproval",
            {"permissions": {"network": {"enabled": True}}},
            {"permissions": {"network": {"enabled": True}}, "scope": "session"},
        ),
        (
            "item/tool/requestUserInput",
            {"questions": [{"id": "q1", "header": "Pick", "question": "Which?"}]},
            {"answers": {"q1": {"answers": [REFUSED_INPUT]}}},
        ),
    ],
)
def test_requests_are_answered_by_policy(
    method: str, params: dict[str, Any], answer: dict[str, Any]
) -> None:
    assert answer_server_request(method, params) == answer


def test_the_pointer_to_the_ask_tool_names_it() -> None:
    assert "shadowclone_ask" in REFUSED_INPUT and "`ask`" in REFUSED_INPUT


@pytest.mark.parametrize(
    "method", ["item/tool/call", "account/chatgptAuthTokens/refresh", "attestation/generate", "x"]
)
def test_requests_the_driver_does_not_handle_get_no_answer(method: str) -> None:
    assert answer_server_request(method, {}) is None
