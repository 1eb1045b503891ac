"""Commands plugins add through the entry-point group `shadowclone.commands`: listed by
`--help`, run by name; a broken one, a clash between two plugins and a built-in name each end
in one line, and never in a traceback; the other commands keep working."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from shadowclone_testing.harness import CliResult, run_shadowclone

HELLO = '''
import click

@click.command()
@click.argument("name")
def hello(name):
    """Greet NAME from a plugin."""
    click.echo(f"hello {name}")
'''


def command_distribution(site: Path, name: str, version: str, entries: dict[str, str]) -> None:
    """An installed distribution whose module `mod_NAME` holds HELLO and whatever else, with
    `entries` (command name -> object in the module) in shadowclone.commands."""
    module = f"mod_{name.replace('-', '_')}"
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{command} = {module}:{target}\n" for command, target in entries.items())
    (info / "entry_points.txt").write_text(f"[shadowclone.commands]\n{lines}")
    (site / f"{module}.py").write_text(textwrap.dedent(HELLO) + "not_a_command = 42\n")


def shadowclone(site: Path, *args: str) -> CliResult:
    return run_shadowclone(*args, env={"PYTHONPATH": str(site)})


@pytest.fixture
def site(tmp_path: Path) -> Path:
    found = tmp_path / "site"
    command_distribution(found, "greeter", "1.0", {"hello": "hello", "list": "hello"})
    command_distribution(found, "twin-a", "1.0", {"twin": "hello"})
    command_distribution(found, "twin-b", "2.0", {"twin": "hello"})
    command_distribution(found, "odd", "0.1", {"odd": "not_a_command"})
    (found / "broken_cmd-0.1.dist-info").mkdir()
    (found / "broken_cmd-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-cmd\nVersion: 0.1\n"
    )
    (found / "broken_cmd-0.1.dist-info" / "entry_points.txt").write_text(
        "[shadowclone.commands]\nbroken = no_such_module_here:command\n"
    )
    return found


def test_a_plugins_command_is_listed_and_runs(site: Path) -> None:
    shown = shadowclone(site, "--help")
    assert shown.code == 0, shown.err
    assert "hello" in shown.out and "Greet NAME from a plugin." in shown.out
    ran = shadowclone(site, "hello", "octo")
    assert (ran.code, ran.out, ran.err) == (0, "hello octo\n", "")


@pytest.mark.usefixtures("sc_home")
def test_a_built_in_name_is_never_taken(site: Path) -> None:
    listed = shadowclone(site, "list")
    assert listed.code == 0, listed.err
    assert "hello" not in listed.out


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("twin", "the command twin is claimed by twin-a 1.0 and twin-b 2.0: uninstall one"),
        ("odd", "the command odd of odd 0.1 is int, not a click command"),
        ("broken", "the command broken of broken-cmd 0.1 cannot load: ModuleNotFoundError"),
    ],
)
def test_a_bad_command_is_one_line_and_the_others_keep_working(
    site: Path, command: str, words: str
) -> None:
    ran = shadowclone(site, command)
    assert ran.code == 1
    assert ran.err.startswith(f"shadowclone: {words}"), ran.err
    assert len(ran.err.strip().splitlines()) == 1 and "Traceback" not in ran.err
    shown = shadowclone(site, "--help")
    assert shown.code == 0 and "(unavailable: " in shown.out and "Greet NAME" in shown.out
