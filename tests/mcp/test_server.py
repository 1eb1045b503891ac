"""The MCP server, driven over stdio by the `mcp` client, offers start, list, get, send,
answer and stop with the CLI's rules, the CLI's data and the CLI's error lines."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from shadowclone.config import Paths, set_value
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    InboxKind,
    ProgressKind,
    ProgressLine,
    Question,
    Record,
    State,
    Step,
)
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.mcp_client import call, connected, text_of

pytestmark = pytest.mark.anyio

Cli = Callable[..., CliResult]

COMMAND = [sys.executable, "-P", "-c", "from shadowclone.cli.mcp_cmd import mcp; mcp()"]
"""The server as the click command `shadowclone mcp` runs."""

AUDITED = [
    sys.executable,
    "-P",
    "-c",
    """
import os, sys
secrets = os.path.abspath(sys.argv[1])
def refuse_the_secrets_file(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        if os.path.abspath(os.fsdecode(args[0])) == secrets:
            raise PermissionError("the MCP server opened the secrets file")
sys.addaudithook(refuse_the_secrets_file)
from shadowclone.mcp.early import main
sys.exit(main())
""",
]
"""The server with an audit hook that makes any open of the secrets file (its path the last
argument) fail the tool call, or the whole server if it happened at start."""

TOOLS = {"start", "list", "get", "follow", "send", "answer", "stop", "resume"}
SECRET = "ghp_" + "Zq7" * 12


async def refused(
    client: Client, cli: Cli, tool: str, arguments: dict[str, Any], *argv: str
) -> str:
    """The tool error's text, after checking it is the line `shadowclone ARGV` prints."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error and result.structured_content is None
    line = text_of(result)
    shown = cli(*argv)
    assert shown.code != 0
    assert shown.err == f"shadowclone: {line}\n"
    return line


def ask(home: Paths, clone_id: str) -> None:
    """What serve and the clone write when the clone asks a question."""
    folder = RunFolder(home.clones_dir / clone_id)
    folder.write_record(Record(id=clone_id, state=State.WAITING))
    question = Question("q1", "Which database?", ("postgres", "sqlite"), "sqlite")
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.QUESTION, question=question))


async def test_the_tools_and_their_input_schemas(sc_home: Paths, tmp_path: Path) -> None:
    async with connected(tmp_path) as client:
        assert client.server_info is not None and client.server_info.name == "shadowclone"
        assert "`answer`" in (client.instructions or "")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        wrong_type = await client.call_tool("get", {"clone_id": "x", "lines": "many"})
        missing = await client.call_tool("start", {})
    assert wrong_type.is_error
    assert text_of(wrong_type) == (
        "get: lines: Input should be a valid integer, unable to parse string as an integer"
    )
    assert missing.is_error and text_of(missing) == "start: target: Field required"
    assert set(tools) == TOOLS
    schemas = {name: tool.input_schema for name, tool in tools.items()}
    assert {name: schema.get("required", []) for name, schema in schemas.items()} == {
        "start": ["target"],
        "list": [],
        "get": ["clone_id"],
        "follow": ["clone_id"],
        "send": ["clone_id", "text"],
        "answer": ["clone_id", "question_id", "choice"],
        "stop": ["clone_id"],
        "resume": ["clone_id"],
    }
    types = {
        (name, argument): (
            spec.get("type") or [s["type"] for s in spec["anyOf"]],
            spec.get("default"),
        )
        for name, schema in schemas.items()
        for argument, spec in schema["properties"].items()
    }
    assert types == {
        ("start", "target"): ("string", None),
        ("start", "engine"): (["string", "null"], None),
        ("start", "instructions"): ("string", ""),
        ("start", "max_minutes"): (["number", "null"], None),
        ("start", "max_turns"): (["integer", "null"], None),
        ("start", "max_cost"): (["number", "null"], None),
        ("list", "include_all"): ("boolean", False),
        ("list", "limit"): ("integer", 30),
        ("get", "clone_id"): ("string", None),
        ("get", "lines"): ("integer", 20),
        ("follow", "clone_id"): ("string", None),
        ("follow", "timeout_s"): ("number", 600.0),
        ("follow", "lines"): ("integer", 20),
        ("send", "clone_id"): ("string", None),
        ("send", "text"): ("string", None),
        ("answer", "clone_id"): ("string", None),
        ("answer", "question_id"): ("string", None),
        ("answer", "choice"): ("string", None),
        ("stop", "clone_id"): ("string", None),
        ("resume", "clone_id"): ("string", None),
    }
    for name, tool in tools.items():
        assert tool.description and tool.title, name
        assert all(spec.get("description") for spec in schemas[name]["properties"].values())
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name in ("list", "get", "follow")), name
    [engine_choice, _] = schemas["start"]["properties"]["engine"]["anyOf"]
    assert engine_choice["enum"] == ["claude", "codex", "scripted"]
    assert "question_id" in (tools["answer"].description or "")
    assert "`get`" in str(schemas["answer"]["properties"]["question_id"]["description"])
    assert tools["stop"].annotations is not None and tools["stop"].annotations.destructive_hint
    secretive = ("secret", "token", "key", "password", "login")
    assert not [a for (_, a) in types if any(word in a for word in secretive)]


async def test_start_list_get_send_stop_give_the_clis_json(
    sc_home: Paths, tmp_path: Path, sc_cli: Cli
) -> None:
    set_up(sc_home)
    sc_home.secrets_file.write_text(f'[github]\ntoken = "{SECRET}"\n')
    sc_home.secrets_file.chmod(0o600)
    seen: list[str] = []
    async with connected(tmp_path, [*AUDITED, str(sc_home.secrets_file)]) as client:
        started = await call(
            client, "start", target="https://github.com/acme/app/issues/7", instructions="be brief"
        )
        clone_id = started["id"]
        folder = RunFolder(sc_home.clones_dir / clone_id)
        request = folder.request()
        assert (request.target.key, request.target.kind) == ("acme/app#7", "issue")
        assert (request.engine, request.instructions) == ("scripted", "be brief")
        assert (started["state"], started["target"]["number"]) == ("queued", 7)

        listed = await call(client, "list")
        assert listed == {"clones": json.loads(sc_cli("list", "--json").out), "problems": []}
        assert [c["id"] for c in listed["clones"]] == [clone_id]

        folder.append_progress(ProgressLine(Step.TARGET, ProgressKind.NOTE, "issue #7"))
        got = await call(client, "get", clone_id=clone_id[:9])
        assert got == json.loads(sc_cli("get", clone_id, "--json").out)
        assert [p["text"] for p in got["last_progress"]] == ["issue #7"]

        sent = await call(client, "send", clone_id=clone_id, text="also update the docs")
        inbox, _, _ = folder.inbox()
        assert [(i.id, i.kind, i.text) for i in inbox] == [
            (sent["id"], InboxKind.MESSAGE, "also update the docs")
        ]

        stopped = await call(client, "stop", clone_id=clone_id)
        assert folder.stop_marker() is not None
        assert (stopped["state"], stopped["stop_requested"]) == ("stopped", True)
        assert set(stopped) == set(got)
        for tool, arguments in (
            ("list", {"include_all": True}),
            ("get", {"clone_id": clone_id, "lines": 100}),
        ):
            seen.append(text_of(await client.call_tool(tool, arguments)))
    assert seen and not [text for text in seen if SECRET in text]


async def test_answer_an_open_question_once(sc_home: Paths, tmp_path: Path, sc_cli: Cli) -> None:
    set_up(sc_home)
    async with connected(tmp_path) as client:
        clone_id = (await call(client, "start", target="acme/app#3"))["id"]
        assert (await call(client, "get", clone_id=clone_id))["question"] is None
        ask(sc_home, clone_id)
        got = await call(client, "get", clone_id=clone_id)
        assert got["state"] == "waiting"
        assert got["question"] == {
            "id": "q1",
            "text": "Which database?",
            "options": ["postgres", "sqlite"],
            "recommended": "sqlite",
            "free_text": False,
            "timeout_s": 1800.0,
            "cap": False,
        }
        line = await refused(
            client,
            sc_cli,
            "answer",
            {"clone_id": clone_id, "question_id": "q1", "choice": "mysql"},
            *("answer", clone_id, "q1", "mysql"),
        )
        assert line == (
            "choice 'mysql' for question q1: expected one of 'postgres', 'sqlite' "
            "or an option's number"
        )
        answered = await call(client, "answer", clone_id=clone_id, question_id="q1", choice="2")
        assert (answered["kind"], answered["text"], answered["question_id"]) == (
            "answer",
            "sqlite",
            "q1",
        )
        inbox, _, _ = RunFolder(sc_home.clones_dir / clone_id).inbox()
        assert [(i.kind, i.question_id, i.text) for i in inbox] == [
            (InboxKind.ANSWER, "q1", "sqlite")
        ]
        assert (await call(client, "get", clone_id=clone_id))["question"] is None
        line = await refused(
            client,
            sc_cli,
            "answer",
            {"clone_id": clone_id, "question_id": "q1", "choice": "postgres"},
            *("answer", clone_id, "q1", "postgres"),
        )
        assert line == "question q1 is already answered"
        line = await refused(
            client,
            sc_cli,
            "answer",
            {"clone_id": clone_id, "question_id": "q7", "choice": "postgres"},
            *("answer", clone_id, "q7", "postgres"),
        )
        assert line == f"clone {clone_id} has no question 'q7' (its questions: q1)"


async def test_start_refusals_are_the_clis_lines(
    sc_home: Paths, tmp_path: Path, sc_cli: Cli
) -> None:
    async with connected(tmp_path) as client:
        line = await refused(
            client, sc_cli, "start", {"target": "acme/app#1"}, "start", "acme/app#1"
        )
        assert line == "acme/app is not set up on this machine; run `shadowclone setup acme/app`"

        set_up(sc_home)
        for target in ("acme/app", "https://github.com/acme/app", "acme/app#0"):
            line = await refused(client, sc_cli, "start", {"target": target}, "start", target)
            assert line == (
                f"target {target!r}: expected owner/repo#N, or an issue or pull request URL"
            )

        first = (await call(client, "start", target="acme/app#1"))["id"]
        line = await refused(
            client,
            sc_cli,
            "start",
            {"target": "https://github.com/acme/app/pull/1"},
            *("start", "https://github.com/acme/app/pull/1"),
        )
        assert line == f"acme/app#1 already has an active clone: {first} (queued)"

        set_value(sc_home, "daily_clones", "1")  # the running server reads it on the next call
        line = await refused(
            client, sc_cli, "start", {"target": "acme/app#2"}, "start", "acme/app#2"
        )
        assert line == (
            "daily limit reached: 1 clones started in the last 24 hours (daily_clones = 1)"
        )

        set_value(sc_home, "version", "2")
        line = await refused(
            client, sc_cli, "start", {"target": "acme/app#2"}, "start", "acme/app#2"
        )
        assert line.endswith("now at version 2; run `shadowclone setup acme/app` again")

        # An engine is a choice of the installed ones, checked by the tool's schema.
        unknown = await client.call_tool("start", {"target": "acme/app#2", "engine": "nope"})
        assert unknown.is_error and text_of(unknown) == (
            "start: engine: Input should be 'claude', 'codex' or 'scripted'"
        )


async def test_unknown_and_ended_clones_are_the_clis_lines(
    sc_home: Paths, tmp_path: Path, sc_cli: Cli
) -> None:
    set_up(sc_home)
    async with connected(tmp_path) as client:
        missing = "no clone 'nope'; `shadowclone list` shows the clones"
        for tool, arguments, argv in (
            ("get", {}, ()),
            ("send", {"text": "hi"}, ("hi",)),
            ("answer", {"question_id": "q1", "choice": "1"}, ("q1", "1")),
            ("stop", {}, ()),
        ):
            line = await refused(
                client, sc_cli, tool, {"clone_id": "nope", **arguments}, tool, "nope", *argv
            )
            assert line == missing

        clone_id = (await call(client, "start", target="acme/app#1"))["id"]
        line = await refused(
            client, sc_cli, "send", {"clone_id": clone_id, "text": "  "}, "send", clone_id, "  "
        )
        assert line == "message: expected some text, got nothing"
        RunFolder(sc_home.clones_dir / clone_id).write_record(Record(id=clone_id, state=State.DONE))
        line = await refused(
            client, sc_cli, "send", {"clone_id": clone_id, "text": "hi"}, "send", clone_id, "hi"
        )
        assert line == f"clone {clone_id} is done; it takes no messages"
        line = await refused(client, sc_cli, "stop", {"clone_id": clone_id}, "stop", clone_id)
        assert line == f"clone {clone_id} has already ended: done"

        broken = (await call(client, "start", target="acme/app#2"))["id"]
        request_file = RunFolder(sc_home.clones_dir / broken).request_file
        request_file.write_text("{not json")
        listed = await call(client, "list")
        [problem] = listed["problems"]
        assert problem.startswith(f"{request_file}: not valid JSON")
        assert [c["id"] for c in listed["clones"]] == [clone_id]
        assert f"warning: {problem}\n" in sc_cli("list").err


async def test_a_missing_config_is_the_clis_line(
    sc_home: Paths, tmp_path: Path, sc_cli: Cli
) -> None:
    sc_home.config_file.unlink()
    async with connected(tmp_path) as client:
        line = await refused(
            client, sc_cli, "start", {"target": "acme/app#1"}, "start", "acme/app#1"
        )
        assert line == (
            f"{sc_home.config_file}: no config file; run `shadowclone config init` to create one"
        )
        # What only reads works with the defaults, as the CLI's reading commands do.
        assert (await call(client, "list"))["clones"] == []
        assert sc_cli("list").code == 0


async def test_the_click_command_serves_the_same_tools(sc_home: Paths, tmp_path: Path) -> None:
    set_up(sc_home)
    async with connected(tmp_path, COMMAND) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        clone_id = (await call(client, "start", target="acme/app#5"))["id"]
        listed = await call(client, "list", limit=5)
    assert [c["id"] for c in listed["clones"]] == [clone_id]
    assert (sc_home.clones_dir / clone_id / "request.json").is_file()


async def test_hostile_run_folder_files_are_the_clis_lines(
    sc_home: Paths, tmp_path: Path, sc_cli: Cli
) -> None:
    """Every oddity of the files others write, for each tool: the CLI's one line (or the
    CLI's data), never a crash of the server, and the healthy clone still shown."""
    from shadowclone_testing.hostile import ODDITIES, fill_run_folder, make_odd

    set_up(sc_home)
    outside = tmp_path / "outside"
    outside.mkdir()
    async with connected(tmp_path) as client:
        healthy = (await call(client, "start", target="acme/app#1"))["id"]
        for number, oddity in enumerate(ODDITIES, start=2):
            for kind in ("request.json", "record.json", "progress.jsonl", "<run folder>"):
                clone_id = (await call(client, "start", target=f"acme/app#{number}"))["id"]
                fill_run_folder(RunFolder(sc_home.clones_dir / clone_id), clone_id)
                make_odd(sc_home, clone_id, kind, oddity, outside)
                result = await client.call_tool("get", {"clone_id": clone_id})
                shown = sc_cli("get", clone_id)
                if result.is_error:
                    assert shown.err == f"shadowclone: {text_of(result)}\n", (kind, oddity)
                else:
                    assert shown.code == 0, (kind, oddity, shown.err)
                for tool, arguments in (("send", {"text": "hi"}), ("stop", {})):
                    result = await client.call_tool(tool, {"clone_id": clone_id, **arguments})
                    assert not result.is_error or "\n" not in text_of(result), (kind, oddity)
                # Free the target for the next oddity: the clone ends, whatever its files.
                with contextlib.suppress(OSError):
                    (sc_home.active_dir / clone_id).unlink()
        assert (await call(client, "get", clone_id=healthy))["id"] == healthy


async def test_follow_tells_each_line_and_returns_when_the_clone_asks_or_ends(
    sc_home: Paths, tmp_path: Path, sc_cli: Cli
) -> None:
    """`follow` waits without polling by the assistant: each new progress line is a progress
    notification (a secret-shaped token in it is scrubbed), and the call returns the clone as
    soon as it asks a question, or at once when it has ended."""
    set_up(sc_home)
    told: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        told.append(message or "")

    async with connected(tmp_path) as client:
        clone_id = (await call(client, "start", target="acme/app#3"))["id"]
        folder = RunFolder(sc_home.clones_dir / clone_id)
        folder.write_record(Record(id=clone_id, state=State.RUNNING))

        async def clone_works() -> None:
            for text in ("cloned acme/app", f"token {SECRET} seen", "writing the tests"):
                await anyio.sleep(0.3)
                folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.TEXT, text))
            await anyio.sleep(0.3)
            ask(sc_home, clone_id)

        async with anyio.create_task_group() as clone:
            clone.start_soon(clone_works)
            result = await client.call_tool(
                "follow", {"clone_id": clone_id, "lines": 2}, progress_callback=progress
            )
        assert not result.is_error, text_of(result)
        followed = result.structured_content
        assert followed is not None and followed["state"] == "waiting"
        assert followed["question"]["id"] == "q1"
        assert len(followed["last_progress"]) == 2
        assert told[:3] == ["cloned acme/app", "token [redacted] seen", "writing the tests"]
        assert SECRET not in json.dumps(told)

        folder.write_record(Record(id=clone_id, state=State.DONE))
        ended = await call(client, "follow", clone_id=clone_id, timeout_s=600)
        assert ended["state"] == "done"

        quiet = (await call(client, "start", target="acme/app#4"))["id"]
        assert (await call(client, "follow", clone_id=quiet, timeout_s=0.5))["state"] == "queued"

        line = await refused(client, sc_cli, "follow", {"clone_id": "nope"}, "get", "nope")
        assert line == "no clone 'nope'; `shadowclone list` shows the clones"
        too_long = await client.call_tool("follow", {"clone_id": quiet, "timeout_s": 7200})
        assert text_of(too_long) == "follow: timeout_s: Input should be less than or equal to 3600"
