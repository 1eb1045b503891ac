"""The conventions of command-line tools: piped `list` as whole tab-separated values, shell
completion, `--engine` among the installed engines, `--json` on every command that reports,
serve's log level, and help with whole summaries and examples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Question, Record, State, Usage
from shadowclone_testing.harness import (
    CLI_PROGRAM,
    CliResult,
    in_terminal,
    run_shadowclone,
    set_up,
    skip_or_fail,
)
from shadowclone_testing.serving import ServeProcess

Cli = Callable[..., CliResult]


def started(cli: Cli, target: str) -> str:
    result = cli("start", target, "--json")
    assert result.code == 0, result.err
    clone_id: str = json.loads(result.out)["id"]
    return clone_id


def test_list_to_a_terminal_is_a_table_and_to_a_pipe_whole_values(
    sc_cli: Cli, sc_home: Paths
) -> None:
    set_up(sc_home)
    clone_id = started(sc_cli, "acme/app#4")
    long_url = "https://github.com/acme/app/pull/4?" + "x" * 150
    RunFolder(sc_home.clones_dir / clone_id).write_record(
        Record(id=clone_id, state=State.RUNNING, pr_url=long_url, usage=Usage(10, 2, 0.1234))
    )
    table = in_terminal("list").splitlines()
    assert table[0].split() == [
        "ID",
        "STATE",
        "TARGET",
        "ENGINE",
        "REQUESTED",
        "COST",
        "PR",
        "/",
        "QUESTION",
    ]
    assert table[1].split()[:4] == [clone_id, "running", "acme/app#4", "scripted"]
    assert "$0.12" in table[1].split()

    piped = run_shadowclone("list")
    assert piped.code == 0, piped.err
    [row] = piped.out.splitlines()
    requested = json.loads(sc_cli("get", clone_id, "--json").out)["requested_at"]
    cells = row.split("\t")
    assert cells[:4] == [clone_id, "running", "acme/app#4", "scripted"]
    assert cells[4].endswith("+00:00") and cells[4][:19] == requested[:19]
    assert cells[5:] == [long_url, "0.1234"]


def test_an_empty_piped_list_prints_nothing(sc_cli: Cli, sc_home: Paths) -> None:
    assert sc_cli("list").out == ""
    assert "no clones yet" in in_terminal("list")


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=60))
def test_a_piped_row_has_seven_cells_whatever_the_question_says(
    sc_cli: Cli, sc_home: Paths, text: str
) -> None:
    """A question is the engine's text: a tab or a newline in it never makes another cell or
    another row."""
    set_up(sc_home)
    listed = json.loads(sc_cli("list", "--json").out)
    clone_id = listed[0]["id"] if listed else started(sc_cli, "acme/app#1")
    question = Question("q1", text, ("a", "b"), "a")
    RunFolder(sc_home.clones_dir / clone_id).write_record(
        Record(id=clone_id, state=State.WAITING, question=question)
    )
    [row] = sc_cli("list").out.split("\n")[:-1]
    cells = row.split("\t")
    assert len(cells) == 7
    shown = "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)
    assert cells[5] == f"? {shown}"


def complete(words: str, home: Paths) -> list[str]:
    """What bash completion offers for `words` (the last one being completed)."""
    parts = words.split(" ")
    done = subprocess.run(
        [sys.executable, "-c", CLI_PROGRAM],
        env={
            **os.environ,
            "_SHADOWCLONE_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(parts) - 1),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines() if line]


def test_completing_a_command_name_imports_no_command(sc_home: Paths) -> None:
    """A TAB after `shadowclone st` reads the commands' names and summaries only: no command's
    module (the clones commands import rich and the node) is imported for it."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write(' '.join(sorted(\n"
        "    m for m in sys.modules if m.startswith('shadowclone.cli.') or m == 'rich'))))\n"
        + CLI_PROGRAM
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "_SHADOWCLONE_COMPLETE": "bash_complete"}
        | {"COMP_WORDS": "shadowclone st", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.splitlines() == ["plain,start", "plain,status", "plain,stop"]
    assert done.stderr.split() == [], done.stderr


def test_completion_offers_commands_clone_ids_and_installed_engines(
    sc_cli: Cli, sc_home: Paths
) -> None:
    set_up(sc_home)
    first, second = started(sc_cli, "acme/app#1"), started(sc_cli, "acme/app#2")
    assert complete("shadowclone st", sc_home) == ["start", "status", "stop"]
    assert complete("shadowclone co", sc_home) == ["completion", "config"]
    assert complete(f"shadowclone get {first[:4]}", sc_home) == [second, first]
    assert complete(f"shadowclone stop {second}", sc_home) == [second]
    assert complete("shadowclone get zz", sc_home) == []
    engines = complete("shadowclone start --engine ", sc_home)
    assert {"claude", "codex", "scripted"} <= set(engines)
    assert complete("shadowclone start --engine cl", sc_home) == ["claude"]


def loaded_modules(words: str, prefixes: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The completions of `words`, and the modules among `prefixes` that a TAB imported."""
    probe = (
        "import atexit, sys\n"
        f"prefixes = {prefixes!r}\n"
        "atexit.register(lambda: sys.stderr.write(' '.join(sorted(\n"
        "    m for m in sys.modules if m.startswith(prefixes)))))\n" + CLI_PROGRAM
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "_SHADOWCLONE_COMPLETE": "bash_complete"}
        | {"COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()], done.stderr.split()


HEAVY = (
    "rich",
    "shadowclone.node.schemas",
    "shadowclone.config.load",
    "shadowclone.plugin.manager",
    "shadowclone_claude",
    "shadowclone_codex",
    "mcp",
)
"""What a TAB must not import: the node's schemas, the config's loader, the plugins, rich."""


def test_completing_an_engine_or_an_id_loads_no_plugin_and_no_schema(
    sc_cli: Cli, sc_home: Paths
) -> None:
    """After the first TAB of an engine (which finds the engines and keeps their names), a TAB
    of an engine or of a clone id reads a small file or the clones folder and nothing more."""
    set_up(sc_home)
    clone_id = started(sc_cli, "acme/app#1")
    assert complete("shadowclone start --engine cl", sc_home) == ["claude"]
    assert sc_home.completion_cache.is_file()
    for words, expected in (
        ("shadowclone start --engine cl", ["claude"]),
        (f"shadowclone get {clone_id[:6]}", [clone_id]),
    ):
        completed, heavy = loaded_modules(words, HEAVY)
        assert (completed, heavy) == (expected, [])


def test_the_engines_a_tab_offers_follow_the_config_and_a_broken_cache(
    sc_cli: Cli, sc_home: Paths
) -> None:
    set_up(sc_home)
    assert "codex" in complete("shadowclone start --engine ", sc_home)
    assert sc_cli("config", "set", "plugins.disabled", '["shadowclone-codex"]').code == 0
    assert "codex" not in complete("shadowclone start --engine ", sc_home)
    for broken in (b"{", b'{"key": 1, "engines": [1]}', b"[]", b"\xff"):
        sc_home.completion_cache.write_bytes(broken)
        assert complete("shadowclone start --engine cl", sc_home) == ["claude"]
    assert json.loads(sc_home.completion_cache.read_bytes())["engines"] == complete(
        "shadowclone start --engine ", sc_home
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_takes_its_completion_script(shell: str) -> None:
    result = run_shadowclone("completion", shell)
    assert result.code == 0, result.err
    assert "_SHADOWCLONE_COMPLETE" in result.out
    program = shutil.which(shell)
    if program is None:
        if shell == "bash":
            skip_or_fail("bash is not installed")
        return  # zsh and fish are not on every machine; bash shows the script is loaded
    loads = {
        "bash": 'eval "$(cat)"; complete -p shadowclone',
        "zsh": 'autoload -U compinit && compinit -u; eval "$(cat)"; '
        "whence -w _shadowclone_completion",
        "fish": "source; complete -c shadowclone",
    }[shell]
    done = subprocess.run(
        [program, "-c", loads], input=result.out, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "shadowclone" in done.stdout


def test_engine_is_one_of_the_installed_engines(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    result = run_shadowclone("start", "acme/app#1", "--engine", "gpt-9")
    assert result.code == 2
    [line] = result.err.splitlines()
    assert line.startswith(
        "shadowclone start: invalid value for '--engine': 'gpt-9' is not an installed engine "
        "(installed: claude, codex, "
    )
    assert sc_cli("start", "acme/app#1", "--engine", "scripted").code == 0


def test_help_of_a_command_loads_no_plugin() -> None:
    probe = (
        "import sys\n"
        "from shadowclone.cli import main\n"
        "for command in ('start', 'get', 'list', 'completion'):\n"
        "    assert main([command, '--help']) == 0\n"
        "loaded = {'shadowclone.plugin.manager', 'importlib.metadata'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_help_shows_examples() -> None:
    for command in ((), ("start",), ("get",), ("list",), ("serve",), ("completion",)):
        result = run_shadowclone(*command, "--help")
        assert result.code == 0 and "Examples:\n    " in result.out, command
        assert "shadowclone " in result.out.split("Examples:\n")[1].splitlines()[0], command


def test_config_init_and_set_report_in_json(sc_cli: Cli, sc_home: Paths) -> None:
    assert json.loads(sc_cli("config", "set", "parallel_clones", "3", "--json").out) == {
        "key": "parallel_clones",
        "value": "3",
    }
    written = json.loads(sc_cli("config", "init", "--force", "--json").out)
    assert written == {"wrote": str(sc_home.config_file), "not_installed": []}


def test_serve_log_level_chooses_what_stderr_gets(sc_home: Paths) -> None:
    quiet = ServeProcess.start(sc_home, "--log-level", "warning")
    try:
        quiet.wait_serving()  # serve.log has the info line
    finally:
        assert quiet.end() == 0, quiet.output
    assert " INFO " not in quiet.output

    loud = ServeProcess.start(sc_home, "-v")
    try:
        loud.wait_serving()
        set_up(sc_home)
        run_shadowclone("start", "acme/app#1")
        from shadowclone_testing.serving import wait_until

        wait_until(lambda: " DEBUG " in loud.output, "a debug line on stderr")
        assert f"serve (pid {loud.pid}) is running" in loud.output
    finally:
        loud.end()
