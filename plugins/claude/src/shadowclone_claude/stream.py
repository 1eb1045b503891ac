"""Claude Code's stream-json output turned into the engine events of `shadowclone.plugin`.

Pure functions of the lines, so recorded transcripts can test them. The shapes are those of
Claude Code 2.1.332 (docs/engines.md): one `assistant` line per content block, a `result` line
that ends each turn (an interrupted one has subtype `error_during_execution`, a
`terminal_reason` of `aborted_*` and no `result` key), many other line types that are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from shadowclone.plugin import EngineEvent, TextEvent, ToolUseEvent, TurnEndedEvent, UsageEvent

# A tool call's input, which Claude sends as a mapping, in one short line:
from shadowclone.plugin import arguments_detail as tool_detail

__all__ = [
    "INTERRUPTED_REASONS",
    "StreamNormalizer",
    "is_interrupted",
    "ran_nothing",
    "tool_detail",
]

INTERRUPTED_REASONS = frozenset({"aborted_streaming", "aborted_tools"})


def is_interrupted(result: Mapping[str, Any]) -> bool:
    """True for the `result` line of a turn that an interrupt cut short."""
    return result.get("terminal_reason") in INTERRUPTED_REASONS


def ran_nothing(result: Mapping[str, Any]) -> bool:
    """True for the `result` line of a turn that never began: an error before any model
    request (Claude Code's answer to a `--resume` of a session it cannot find, after which it
    exits). It ends no turn: the session finishes failed, with the error."""
    return (
        bool(result.get("is_error"))
        and result.get("num_turns") == 0
        and result.get("duration_api_ms") == 0
        and not is_interrupted(result)
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


class StreamNormalizer:
    """Turns parsed stream-json lines into engine events, one line at a time.

    It remembers the session's cost so far: Claude Code's `total_cost_usd` counts the whole
    session, while `UsageEvent` reports the turn that just ended, as `usage` does.
    """

    def __init__(self) -> None:
        self._session_cost_usd = 0.0

    def events(self, line: Mapping[str, Any]) -> list[EngineEvent]:
        kind = line.get("type")
        if kind == "assistant":
            return list(self._assistant(line))
        if kind == "result":
            if ran_nothing(line):
                return []
            return [self._usage(line), TurnEndedEvent(interrupted=is_interrupted(line))]
        return []

    def _assistant(self, line: Mapping[str, Any]) -> Iterator[EngineEvent]:
        message = line.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    yield TextEvent(text)
            elif block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                yield ToolUseEvent(str(block.get("name", "")), tool_detail(block.get("input")))

    def _usage(self, result: Mapping[str, Any]) -> UsageEvent:
        usage = result.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        input_tokens = sum(
            _int(usage.get(key))
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        total = result.get("total_cost_usd")
        cost: float | None = None
        if isinstance(total, int | float):
            cost = max(0.0, float(total) - self._session_cost_usd)
            self._session_cost_usd = float(total)
        return UsageEvent(
            input_tokens=input_tokens,
            output_tokens=_int(usage.get("output_tokens")),
            cost_usd=cost,
        )
