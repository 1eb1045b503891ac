"""What `codex app-server` says, turned into the engine events of `shadowclone.plugin`, and what
the driver answers when it asks.

Pure functions of the messages, so recorded transcripts can test them. The shapes are those of
Codex 0.171.0 as its `app-server generate-json-schema` prints them (docs/engines.md): items
have an `item/started` and, mostly, an `item/completed` (a steer or an interrupt can orphan an
item, so turns are driven by `turn/completed` alone); token usage comes as running totals for the
thread; many other notifications are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from shadowclone.plugin import (
    EngineEvent,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
    arguments_detail,
    one_line,
)

DESCRIPTION_LENGTH = 300
"""A line of the output tail kept for a failure is at most this long."""

QUIET_METHODS = frozenset(
    {
        "item/agentMessage/delta",
        "item/reasoning/textDelta",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/summaryPartAdded",
        "thread/tokenUsage/updated",
        "account/rateLimits/updated",
        "thread/readState/changed",
        "remoteControl/status/changed",
    }
)
"""Notifications left out of the output tail: they say nothing about why a session ended."""

METHOD_NOT_FOUND = -32601


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def command_detail(item: Mapping[str, Any]) -> str:
    """The command as the model wrote it: Codex wraps it (`/bin/bash -lc '...'`) in `command`
    and keeps the model's own text in `commandActions`."""
    actions = [
        str(action.get("command"))
        for action in item.get("commandActions") or []
        if isinstance(action, Mapping) and isinstance(action.get("command"), str)
    ]
    if actions:
        return one_line(" && ".join(actions))
    return one_line(str(item.get("command") or ""))


def tool_use(item: Mapping[str, Any]) -> ToolUseEvent | None:
    """The tool use an item stands for, or None for items that are no tool (messages,
    reasoning, plans)."""
    kind = item.get("type")
    if kind == "commandExecution":
        return ToolUseEvent("shell", command_detail(item))
    if kind == "fileChange":
        paths = [
            str(change.get("path"))
            for change in item.get("changes") or []
            if isinstance(change, Mapping) and change.get("path")
        ]
        return ToolUseEvent("edit", one_line(", ".join(paths)))
    if kind == "mcpToolCall":
        name = f"mcp__{item.get('server')}__{item.get('tool')}"
        return ToolUseEvent(name, arguments_detail(item.get("arguments")))
    if kind == "dynamicToolCall":
        return ToolUseEvent(str(item.get("tool")), arguments_detail(item.get("arguments")))
    if kind == "webSearch":
        return ToolUseEvent("web_search", one_line(str(item.get("query") or "")))
    if kind == "imageView":
        return ToolUseEvent("view_image", one_line(str(item.get("path") or "")))
    if kind == "collabAgentToolCall":
        return ToolUseEvent(str(item.get("tool")), one_line(str(item.get("prompt") or "")))
    return None


class NotificationNormalizer:
    """Turns app-server notifications into engine events, one at a time.

    It remembers the thread's token totals: Codex reports running totals for the whole thread
    after each model response, while `UsageEvent` reports the turn that just ended.
    """

    def __init__(self) -> None:
        self._input_before_turn = 0
        self._output_before_turn = 0
        self._input_total = 0
        self._output_total = 0

    def events(self, method: str, params: Mapping[str, Any]) -> list[EngineEvent]:
        if method == "item/started":
            event = tool_use(_mapping(params.get("item")))
            return [event] if event is not None else []
        if method == "item/completed":
            item = _mapping(params.get("item"))
            text = item.get("text")
            if item.get("type") == "agentMessage" and isinstance(text, str) and text.strip():
                return [TextEvent(text)]
            return []
        if method == "thread/tokenUsage/updated":
            total = _mapping(_mapping(params.get("tokenUsage")).get("total"))
            self._input_total = _int(total.get("inputTokens"))
            self._output_total = _int(total.get("outputTokens"))
            return []
        if method == "turn/completed":
            turn = _mapping(params.get("turn"))
            usage = UsageEvent(
                input_tokens=self._input_total - self._input_before_turn,
                output_tokens=self._output_total - self._output_before_turn,
            )
            self._input_before_turn = self._input_total
            self._output_before_turn = self._output_total
            return [usage, TurnEndedEvent(interrupted=turn.get("status") == "interrupted")]
        return []


def turn_error(params: Mapping[str, Any]) -> str:
    """The error of a `turn/completed` or an `error` notification, as one line ("" if none)."""
    turn = _mapping(params.get("turn"))
    error = _mapping(turn.get("error") if turn else params.get("error"))
    message = error.get("message")
    details = error.get("additionalDetails")
    text = str(message) if message else ""
    if details:
        text = f"{text} ({details})" if text else str(details)
    return one_line(text, DESCRIPTION_LENGTH)


def describe(message: Mapping[str, Any]) -> str | None:
    """One line for the output tail kept for a failure, or None for a message not worth it."""
    method = message.get("method")
    params = _mapping(message.get("params"))
    if method is None:
        error = _mapping(message.get("error"))
        if error:
            return one_line(f"error response: {error.get('message')}", DESCRIPTION_LENGTH)
        return None
    if method in QUIET_METHODS:
        return None
    if method in ("item/started", "item/completed"):
        item = _mapping(params.get("item"))
        event = tool_use(item)
        if event is not None:
            what = f"{event.name}: {event.detail}"
        elif isinstance(item.get("text"), str):
            what = f"{item.get('type')}: {item['text']}"
        elif item.get("type") == "userMessage":
            what = "userMessage: " + " ".join(
                str(part.get("text"))
                for part in item.get("content") or []
                if isinstance(part, Mapping) and part.get("type") == "text"
            )
        else:
            what = str(item.get("type"))
        status = item.get("status")
        if method == "item/completed" and status:
            what += f" [{status}]"
        return one_line(f"{method} {what}", DESCRIPTION_LENGTH)
    if method == "item/commandExecution/outputDelta":
        return one_line(f"output: {params.get('delta', '')}", DESCRIPTION_LENGTH)
    if method in ("thread/started", "turn/started"):
        owner = _mapping(params.get("thread") or params.get("turn"))
        return f"{method} {owner.get('id')}"
    if method == "thread/status/changed":
        return f"thread status: {_mapping(params.get('status')).get('type')}"
    if method == "mcpServer/startupStatus/updated":
        failure = params.get("error")
        line = f"MCP server {params.get('name')}: {params.get('status')}"
        return one_line(line + (f" ({failure})" if failure else ""), DESCRIPTION_LENGTH)
    if method == "turn/completed":
        status = _mapping(params.get("turn")).get("status")
        why = turn_error(params)
        return one_line(f"turn/completed {status}" + (f": {why}" if why else ""))
    if method in ("error", "warning", "configWarning", "deprecationNotice"):
        text = turn_error(params) if method == "error" else str(params.get("message") or "")
        return one_line(f"{method}: {text or json.dumps(params)}", DESCRIPTION_LENGTH)
    return one_line(f"{method} {json.dumps(params, ensure_ascii=False)}", DESCRIPTION_LENGTH)


# --------------------------------------------------------------------------- requests from Codex

REFUSED_INPUT = (
    "Nobody can answer here. To ask the owner, call the `ask` tool of the shadowclone_ask "
    "MCP server; otherwise choose the safest option yourself."
)


def _user_input_answers(params: Mapping[str, Any]) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for question in params.get("questions") or []:
        if isinstance(question, Mapping) and isinstance(question.get("id"), str):
            answers[question["id"]] = {"answers": [REFUSED_INPUT]}
    return {"answers": answers}


def answer_server_request(method: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The driver's answer to a request Codex sends it, by policy, or None when the driver does
    not handle `method` (it is then refused with a JSON-RPC error).

    The container is the sandbox and the owner is not there: every approval is granted.
    Questions go to the owner only through the ask tool, so Codex's own user-input requests
    are answered with a pointer to it.
    """
    if method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval"):
        return {"decision": "accept"}
    if method in ("execCommandApproval", "applyPatchApproval"):
        return {"decision": "approved"}
    if method == "mcpServer/elicitation/request":
        # Codex gates MCP tool calls with a form of no fields; a URL has nothing to fill in.
        content: dict[str, Any] | None = None if params.get("mode") == "url" else {}
        return {"action": "accept", "content": content, "_meta": None}
    if method == "item/permissions/requestApproval":
        return {"permissions": dict(_mapping(params.get("permissions"))), "scope": "session"}
    if method == "item/tool/requestUserInput":
        return _user_input_answers(params)
    return None
