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

The server lives in `fakes.modelserver`, one concern a module; this module is where tests
import it from.
"""

from __future__ import annotations

from shadowclone_testing.fakes.modelserver.replies import (
    ApiError,
    CallTool,
    Hang,
    Reply,
    Rule,
    Shell,
    Text,
    UsageLimit,
)
from shadowclone_testing.fakes.modelserver.requests import Api, ModelRequest
from shadowclone_testing.fakes.modelserver.server import FAKE_MODEL, KEEPALIVE_S, FakeModelServer
from shadowclone_testing.fakes.modelserver.stream import ToolNotOffered

__all__ = [
    "FAKE_MODEL",
    "KEEPALIVE_S",
    "Api",
    "ApiError",
    "CallTool",
    "FakeModelServer",
    "Hang",
    "ModelRequest",
    "Reply",
    "Rule",
    "Shell",
    "Text",
    "ToolNotOffered",
    "UsageLimit",
]
