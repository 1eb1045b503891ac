"""The model requests the fake server received, parsed leniently for a test's checks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

Api = Literal["anthropic", "openai"]


def strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def text_blocks(content: object, kinds: Sequence[str]) -> list[str]:
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
            text_blocks(item.get("content"), kinds)
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
        return any(text in string for string in strings(self._conversation()))

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
                results.append("".join(strings(item.get("output"))))
            content = item.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    results.append("".join(strings(block.get("content"))))
        return results


# --------------------------------------------------------------------------- rendering
