"""Every operation from the command line, `--json` for scripts, exit codes 0/1/2, and one
line (never a traceback) for every error the owner can cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, ProgressLine, Question, Record, State, Step
from shadowclone.plugin import Outcome
from shadowclone_testing.harness import CliResult, run_shadowclone, set_up

Cli = Callable[..., CliResult]


def started(cli: Cli, home: Paths, target: str = "acme/app#1") -> str:
    set_up(home)
    result = cli("start", target, "--json")
    assert result.code == 0, result.err
    clone_id: str = json.loads(result.out)["id"]
    return clone_id


def test_start_list_get_as_a_person_reads_them(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    result = sc_cli("start", "https://github.com/acme/app/issues/4")
    assert result.code == 0
    clone_id = result.out.split()[1]
    assert result.out.splitlines() == [
        f"queued {clone_id} on acme/app#4 with scripted",
        "waiting for serve, which is not running: start it with `shadowclone serve`, or keep it "
        "running with `shadowclone service install`",
        f"follow it: shadowclone get {clone_id} --follow",
    ]
    listing = sc_cli("list")  # not a terminal: tab-separated (tests/cli/test_conventions.py)
    assert listing.out.split("\t")[:4] == [clone_id, "queued", "acme/app#4", "scripted"]
    shown = sc_cli("get", clone_id).out
    assert f"clone     {clone_id}  queued" in shown and "target    acme/app#4" in shown


def test_json_output_for_scripts(sc_cli: Cli, sc_home: Paths) -> None:
    clone_id = started(sc_cli, sc_home)
    [listed] = json.loads(sc_cli("list", "--json").out)
    assert (listed["id"], listed["state"], listed["target"]["number"]) == (clone_id, "queued", 1)
    got = json.loads(sc_cli("get", clone_id, "--json").out)
    assert got["engine"] == "scripted" and got["stop_requested"] is False
    sent = json.loads(sc_cli("send", clone_id, "hello", "--json").out)
    assert sent["kind"] == "message" and sent["text"] == "hello"
    stopped = json.loads(sc_cli("stop", clone_id, "--json").out)
    assert stopped["state"] == "stopped"


def test_answer_from_the_command_line(sc_cli: Cli, sc_home: Paths) -> None:
    clone_id = started(sc_cli, sc_home)
    folder = RunFolder(sc_home.clones_dir / clone_id)
    folder.write_record(Record(id=clone_id, state=State.WAITING))
    question = Question("q1", "Which database?", ("postgres", "sqlite"), "sqlite")
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.QUESTION, question=question))
    assert "answer: shadowclone answer" in sc_cli("get", clone_id).out
    result = sc_cli("answer", clone_id, "q1", "postgres")
    assert (result.code, result.out.strip()) == (0, "answered q1: postgres")
    again = sc_cli("answer", clone_id, "q1", "sqlite")
    assert (again.code, again.err.strip()) == (1, "shadowclone: question q1 is already answered")


def test_exit_codes_refused_is_1_bad_input_is_2(sc_cli: Cli, sc_home: Paths) -> None:
    refused = sc_cli("start", "acme/app#1")
    assert refused.code == 1
    assert refused.err == (
        "shadowclone: acme/app is not set up on this machine; run `shadowclone setup acme/app`\n"
    )
    bad = sc_cli("start", "acme/app")
    assert bad.code == 2
    assert bad.err == (
        "shadowclone: target 'acme/app': expected owner/repo#N, or an issue or pull request URL\n"
    )
    unknown = sc_cli("get", "nope")
    assert (unknown.code, unknown.err) == (
        2,
        "shadowclone: no clone 'nope'; `shadowclone list` shows the clones\n",
    )
    assert sc_cli("start").code == 2  # a usage error


def test_follow_streams_until_the_clone_ends(sc_cli: Cli, sc_home: Paths) -> None:
    clone_id = started(sc_cli, sc_home)
    folder = RunFolder(sc_home.clones_dir / clone_id)
    folder.append_progress(ProgressLine(Step.TARGET, ProgressKind.NOTE, "issue #1: fix it"))
    folder.append_progress(
        ProgressLine(Step.FINISH, ProgressKind.FINAL, "done", pr_url="http://x/pull/2")
    )
    result = sc_cli("get", clone_id, "--follow")
    lines = result.out.splitlines()
    assert "target    note     issue #1: fix it" in lines[0]
    assert "finish    final    finished: None  http://x/pull/2" in lines[1]


@pytest.mark.parametrize(
    ("outcome", "state", "code"),
    [
        (Outcome.DONE, "done", 0),
        (Outcome.FAILED, "failed", 1),
        (Outcome.STALLED, "failed", 1),
        (Outcome.STOPPED, "stopped", 1),
    ],
)
def test_follow_ends_as_the_final_line_says_before_serve_records_it(
    sc_cli: Cli, sc_home: Paths, outcome: Outcome, state: str, code: int
) -> None:
    """The final line ends the follow; serve records the end a moment later. Until it has,
    the follow's last line and `--exit-status` go by the final line, not the running record."""
    clone_id = started(sc_cli, sc_home)
    folder = RunFolder(sc_home.clones_dir / clone_id)
    folder.write_record(Record(id=clone_id, state=State.RUNNING))
    folder.append_progress(ProgressLine(Step.FINISH, ProgressKind.FINAL, outcome=outcome))
    result = sc_cli("get", clone_id, "--follow", "--exit-status")
    assert result.code == code, result.err
    assert result.out.splitlines()[-1] == f"clone {clone_id} is {state}"


def test_plugins_lists_engines_and_launchers_with_their_distributions(sc_cli: Cli) -> None:
    rows = json.loads(sc_cli("plugins", "--json").out)
    by_name = {r["name"]: r for r in rows}
    for name, family, distribution in (
        ("claude", "engine", "shadowclone-claude"),
        ("codex", "engine", "shadowclone-codex"),
        ("docker", "launcher", "shadowclone-docker-launch"),
        ("fake", "launcher", "shadowclone-fake-launch"),
        ("toolchain", "review stage", "shadowclone"),
        ("github-token", "secret provider", "shadowclone"),
    ):
        row = by_name[name]
        assert (row["family"], row["distribution"], row["status"]) == (
            family,
            distribution,
            "active",
        )
        assert row["version"] == "0.1.0"


def test_config_commands(sc_cli: Cli, sc_home: Paths) -> None:
    paths = json.loads(sc_cli("config", "path", "--json").out)
    assert paths["config"] == str(sc_home.config_file)
    shown = json.loads(sc_cli("config", "show", "--json").out)
    assert shown["engine"] == "scripted" and shown["launcher"] == "fake"
    assert sc_cli("config", "set", "daily_clones", "7").code == 0
    assert "daily_clones = 7" in sc_cli("config", "show").out
    again = sc_cli("config", "init")
    assert again.code == 2 and "already exists; use --force" in again.err


def _no_traceback(result: CliResult, code: int, *parts: str) -> None:
    assert result.code == code, (result.out, result.err)
    assert "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    for part in parts:
        assert part in result.err


def test_bad_config_malformed_request_and_unknown_id_in_a_real_process(
    sc_home: Paths, tmp_path: Path
) -> None:
    env = {"SHADOWCLONE_HOME": os.environ["SHADOWCLONE_HOME"]}
    set_up(sc_home)
    created = run_shadowclone("start", "acme/app#1", "--json", env=env)
    clone_id = json.loads(created.out)["id"]
    RunFolder(sc_home.clones_dir / clone_id).request_file.write_text('{"id": 1')
    _no_traceback(run_shadowclone("get", clone_id, env=env), 2, "request.json: not valid JSON")
    _no_traceback(run_shadowclone("get", "zzz", env=env), 2, "no clone 'zzz'")
    sc_home.config_file.write_text("parallel_clones = 'lots'\n")
    _no_traceback(
        run_shadowclone("list", env=env),
        2,
        str(sc_home.config_file),
        "parallel_clones: expected an integer, got 'lots'",
    )


def test_service_status_reports_without_touching_anything(sc_cli: Cli) -> None:
    result = sc_cli("service", "status", "--json")
    status = json.loads(result.out)
    assert result.code == (0 if status["running"] else 3), result.err
    assert status["manager"] in ("systemd", "launchd")
    assert status["installed"] is False


def test_get_shows_why_serve_ended_a_clone(sc_cli: Cli, sc_home: Paths) -> None:
    clone_id = started(sc_cli, sc_home)
    RunFolder(sc_home.clones_dir / clone_id).write_record(
        Record(
            id=clone_id,
            state=State.FAILED,
            exit_code=3,
            reason="the clone exited with no final line",
            output_tail="Traceback: boom",
        )
    )
    shown = sc_cli("get", clone_id).out
    assert "reason    the clone exited with no final line" in shown
    assert "exit code 3" in shown and "  Traceback: boom" in shown


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (("start",), ("shadowclone start: missing argument 'TARGET'", "[OPTIONS] TARGET")),
        (("start", "a/b#1", "extra"), ("shadowclone start: got unexpected extra argument",)),
        (("start", "--bogus", "a/b#1"), ("shadowclone start: no such option '--bogus'",)),
        (("list", "--limit", "x"), ("shadowclone list: invalid value for '--limit'", "integer")),
        (("answer", "abc"), ("shadowclone answer: missing argument 'QUESTION'", "ID QUESTION")),
        (("config", "set", "engine"), ("shadowclone config set: missing argument 'VALUE'",)),
        (("send",), ("shadowclone send: missing argument",)),
        (("bogus",), ("shadowclone: no such command 'bogus'", "start", "stop")),
        (("config", "bogus"), ("shadowclone config: no such command 'bogus'", "init, path")),
    ],
)
def test_a_usage_error_is_one_line_naming_the_command_and_what_it_expects(
    sc_home: Paths, args: tuple[str, ...], parts: tuple[str, ...]
) -> None:
    env = {"SHADOWCLONE_HOME": os.environ["SHADOWCLONE_HOME"]}
    result = run_shadowclone(*args, env=env)
    _no_traceback(result, 2, *parts, "expected")
    assert "Usage:" not in result.err and "Try " not in result.err


def test_help_keeps_the_whole_text() -> None:
    result = run_shadowclone("start", "--help")
    assert result.code == 0
    assert "Usage: shadowclone start [OPTIONS] TARGET" in result.out
    assert "Options:" in result.out and "--engine" in result.out


def test_the_listed_short_help_is_each_command_s_own() -> None:
    """`--help` lists commands without importing them; what it shows must stay true."""
    from shadowclone.cli import COMMANDS, cli

    context = click.Context(cli)
    for name, (_, _, short) in COMMANDS.items():
        command = cli.get_command(context, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(limit=1000) == short, name
        assert not short.endswith("..."), name


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["--version"], set()),
        # The help lists the commands plugins add: it reads their entry points.
        (["--help"], {"importlib.metadata"}),
    ],
)
def test_the_version_and_help_import_no_command(argv: list[str], allowed: set[str]) -> None:
    """Only the command that runs is imported (the GitHub client, the MCP SDK and rich cost a
    third of a second), and `--version` reads no package metadata."""
    probe = (
        "import sys\n"
        "from shadowclone.cli import main\n"
        f"assert main({argv!r}) == 0\n"
        "heavy = {'github', 'mcp', 'rich', 'shadowclone.cli.app', 'importlib.metadata',\n"
        "         'shadowclone.plugin.manager', 'shadowclone.node.local',\n"
        "         'shadowclone.plugin.node'} & set(sys.modules)\n"
        f"assert heavy <= {allowed!r}, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_listing_clones_loads_no_plugin() -> None:
    probe = (
        "import sys, tempfile, os\n"
        "os.environ['SHADOWCLONE_HOME'] = tempfile.mkdtemp()\n"
        "from shadowclone.cli import main\n"
        "from shadowclone.config import default_paths, init_config\n"
        "init_config(default_paths())  # (config init itself asks the plugins about defaults)\n"
        "before = set(sys.modules)\n"
        "assert main(['list']) == 0\n"
        "loaded = {'github', 'mcp', 'shadowclone.plugin.manager'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_caps_from_the_config_and_from_start(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    assert sc_cli("config", "set", "limits.clone_minutes", "45").code == 0
    result = sc_cli("start", "acme/app#7", "--max-cost", "2.5", "--json")
    assert result.code == 0, result.err
    caps = json.loads(result.out)["caps"]
    assert caps == {"minutes": 45.0, "turns": None, "cost_usd": 2.5}
    shown = sc_cli("get", json.loads(result.out)["id"]).out
    assert "caps      45 minutes, $2.5" in shown
    for option, value in (
        ("--max-cost", "0"),
        ("--max-minutes", "-1"),
        ("--max-minutes", "nan"),
        ("--max-turns", "0"),
        ("--max-cost", "lots"),
    ):
        refused = sc_cli("start", "acme/app#8", option, value)
        assert refused.code == 2, (option, value)
        assert option in refused.err and "Traceback" not in refused.err
        assert len(refused.err.strip().splitlines()) <= 3
    bad = sc_cli("config", "set", "--", "limits.clone_cost_usd", "-3")
    assert bad.code != 0 and "limits.clone_cost_usd" in bad.err
