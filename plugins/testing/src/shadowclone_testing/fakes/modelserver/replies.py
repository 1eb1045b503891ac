"""What the fake model server answers with: the replies a test scripts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from shadowclone_testing.fakes.modelserver.requests import ModelRequest


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
