"""Claude Code's stream-json normalized into engine events, from a recorded real transcript, and
the command line and environment the driver gives the CLI.

The transcript (data/claude-2.1.332.jsonl) comes from `record_claude_transcript`; the scenario
suite in test_claude.py drives the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shadowclone.plugin import (
    EngineLimits,
    EngineTask,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
    load_registry,
)

from shadowclone_claude.driver import ASK_SERVER, ClaudeEngine, command_line, config_dir, engine_env
from shadowclone_claude.stream import StreamNormalizer, is_interrupted, tool_detail

TRANSCRIPT = Path(__file__).with_name("data") / "claude-2.1.332.jsonl"


def transcript() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TRANSCRIPT.read_text().splitlines()]


def test_transcript_normalizes_to_the_turns_it_holds() -> None:
    normalizer = StreamNormalizer()
    events = [event for line in transcript() for event in normalizer.events(line)]

    without_usage = [event for event in events if not isinstance(event, UsageEvent)]
    assert without_usage == [
        TextEvent("Writing the file."),
        ToolUseEvent("Bash", "echo hello > out.txt"),
        TextEvent("Wrote out.txt."),
        TurnEndedEvent(interrupted=False),
        ToolUseEvent("mcp__shadowclone_ask__ask", "Squash the commits?"),
        TextEvent("The owner would rather not squash."),
        TurnEndedEvent(interrupted=False),
        ToolUseEvent("Bash", "echo started && sleep 30.5 && echo over"),
        TurnEndedEvent(interrupted=True),
        TextEvent("Stopped the job, as asked."),
        TurnEndedEvent(interrupted=False),
    ]


def test_usage_is_per_turn_and_adds_up_to_the_session_cost() -> None:
    lines = transcript()
    results = [line for line in lines if line["type"] == "result"]
    normalizer = StreamNormalizer()
    usages = [
        event
        for line in lines
        for event in normalizer.events(line)
        if isinstance(event, UsageEvent)
    ]

    assert len(usages) == len(results) == 4
    for usage, result in zip(usages, results, strict=True):
        # Every turn precedes its result with a usage event holding that turn's tokens.
        assert usage.input_tokens >= result["usage"]["input_tokens"] > 0
        assert usage.output_tokens == result["usage"]["output_tokens"]
        assert usage.cost_usd is not None and usage.cost_usd > 0
    total = sum(usage.cost_usd or 0.0 for usage in usages)
    assert total == pytest.approx(results[-1]["total_cost_usd"])


def test_an_interrupted_turn_is_recognised_without_a_result_text() -> None:
    (interrupted,) = [
        line for line in transcript() if line["type"] == "result" and line["is_error"]
    ]

    assert "result" not in interrupted  # the CLI leaves it out on an interrupt
    assert interrupted["subtype"] == "error_during_execution"
    assert is_interrupted(interrupted)


def test_other_lines_give_no_events() -> None:
    normalizer = StreamNormalizer()
    kinds = {"system", "user", "control_response", "stream_event", "rate_limit_event"}
    others = [line for line in transcript() if line["type"] in kinds]

    assert others, "the transcript lost its system/user lines"
    assert [normalizer.events(line) for line in others] == [[] for _ in others]
    assert normalizer.events({"type": "command_lifecycle", "state": "queued"}) == []
    assert normalizer.events({"type": "assistant", "message": {"content": "not a list"}}) == []


def test_blank_text_and_thinking_blocks_are_not_text_events() -> None:
    line = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "  \n"},
                {"type": "text", "text": "Real text."},
            ]
        },
    }

    assert StreamNormalizer().events(line) == [TextEvent("Real text.")]


@pytest.mark.parametrize(
    ("tool_input", "detail"),
    [
        ({"command": "git status\n  --short", "description": "status"}, "git status --short"),
        ({"file_path": "/w/a.py", "content": "x"}, "/w/a.py"),
        ({"pattern": "needle", "path": "src"}, "src"),
        ({"a": 1}, '{"a": 1}'),
        ({}, ""),
        ("not a mapping", "not a mapping"),
        ({"command": "x" * 500}, "x" * 199 + "…"),
    ],
)
def test_tool_detail_is_one_short_line(tool_input: object, detail: str) -> None:
    assert tool_detail(tool_input) == detail


# --------------------------------------------------------------------------- command line


def make_task(tmp_path: Path, **changes: Any) -> EngineTask:
    defaults: dict[str, Any] = {
        "workspace": tmp_path / "workspace",
        "prompt": "Fix the bug.",
        "ask_command": ("/usr/bin/python3", "-m", "shadowclone.run.ask", "--run", "/run"),
        "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "sk-ant-x"},
        "state_dir": tmp_path / "state",
    }
    return EngineTask(**{**defaults, **changes})


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_command_line_runs_headless_stream_json_with_the_ask_server(tmp_path: Path) -> None:
    argv = command_line(make_task(tmp_path), "/bin/claude")

    assert argv[:2] == ["/bin/claude", "-p"]
    assert option(argv, "--input-format") == option(argv, "--output-format") == "stream-json"
    assert "--verbose" in argv
    assert option(argv, "--permission-mode") == "bypassPermissions"
    assert "--strict-mcp-config" in argv
    servers = json.loads(option(argv, "--mcp-config"))["mcpServers"]
    assert servers == {
        ASK_SERVER: {
            "type": "stdio",
            "command": "/usr/bin/python3",
            "args": ["-m", "shadowclone.run.ask", "--run", "/run"],
        }
    }
    for absent in ("--disallowedTools", "--model", "--max-turns", "--setting-sources"):
        assert absent not in argv


def test_without_project_settings_only_the_clone_s_user_settings_load(tmp_path: Path) -> None:
    """A head that is not the owner's: no setting source of the workspace's (project, local),
    and still no MCP server but the ask server."""
    argv = command_line(make_task(tmp_path, project_settings=False))

    assert option(argv, "--setting-sources") == "user"
    assert "--strict-mcp-config" in argv
    assert list(json.loads(option(argv, "--mcp-config"))["mcpServers"]) == [ASK_SERVER]


def test_command_line_turns_web_tools_off_and_sets_model_and_turns(tmp_path: Path) -> None:
    task = make_task(
        tmp_path, web_tools=False, model="claude-opus-test", limits=EngineLimits(max_turns=7)
    )

    argv = command_line(task)

    assert option(argv, "--disallowedTools") == "WebFetch,WebSearch"
    assert option(argv, "--model") == "claude-opus-test"
    assert option(argv, "--max-turns") == "7"


def test_env_keeps_the_task_and_sets_the_headless_switches(tmp_path: Path) -> None:
    task = make_task(tmp_path, limits=EngineLimits(ask_timeout_s=1800))

    env = engine_env(task, base={"PATH": "/usr/bin", "CLAUDECODE": "1", "HOME": "/home/c"})

    assert env["PATH"] == "/usr/bin"
    assert env["HOME"] == "/home/c"
    assert "CLAUDECODE" not in env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-x"
    assert env["CLAUDE_CONFIG_DIR"] == str(config_dir(task))
    assert config_dir(task).is_relative_to(task.state_dir)
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["DISABLE_AUTOUPDATER"] == "1"
    assert env["IS_SANDBOX"] == "1"
    assert env["ENABLE_TOOL_SEARCH"] == "false"
    # The ask tool may wait 30 minutes: Claude Code must wait longer than that.
    assert int(env["MCP_TOOL_TIMEOUT"]) > 1800 * 1000


def test_the_plugin_registers_the_claude_engine() -> None:
    registration = load_registry().engine("claude")

    assert registration.logins == ("claude-api-key", "claude-subscription")
    assert isinstance(registration.factory(), ClaudeEngine)
