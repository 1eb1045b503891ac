"""A mistyped name (a command, a launcher, a login, an engine) is refused in one line that
names the closest one there is, and a refused `config set` leaves the file as it was."""

from __future__ import annotations

import pytest
from shadowclone.config import Paths
from shadowclone_testing.owner import Cli


def test_a_mistyped_command_names_the_closest(sc_cli: Cli) -> None:
    result = sc_cli("strat", "acme/app#1")
    assert result.code == 2 and result.err.count("\n") == 1
    assert result.err.startswith("shadowclone: no such command 'strat'. Did you mean 'start'?")
    unlike = sc_cli("xyzzy")
    assert unlike.code == 2 and "Did you mean" not in unlike.err


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("launcher", "dockr", "no launcher named 'dockr' (did you mean 'docker'?); installed: "),
        (
            "providers.claude.login",
            '"claude-api-ky"',
            "no secret provider named 'claude-api-ky' (did you mean 'claude-api-key'?)",
        ),
        ("providers.claude.login", '"chatgpt-plan"', "'chatgpt-plan' is a login for codex"),
    ],
)
def test_config_set_refuses_a_name_nothing_installed_has(
    sc_cli: Cli, sc_home: Paths, key: str, value: str, said: str
) -> None:
    before = sc_home.config_file.read_bytes()
    result = sc_cli("config", "set", key, value)
    assert result.code != 0 and said in result.err and result.err.count("\n") == 1, result.err
    assert sc_home.config_file.read_bytes() == before
    assert sc_cli("config", "set", "launcher", "fake").code == 0


def test_a_mistyped_engine_names_the_closest(sc_cli: Cli) -> None:
    result = sc_cli("start", "acme/app#1", "--engine", "scriptd")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    said = "'scriptd' is not an installed engine (did you mean 'scripted'? installed: "
    assert said in result.err


def test_config_init_on_a_core_only_install_names_what_to_add(
    sc_cli: Cli, sc_home: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shadowclone.plugin import manager

    real = manager.load_registry
    monkeypatch.setattr(
        manager, "load_registry", lambda disabled=(), **_: real(disabled, entry_points=[])
    )
    done = sc_cli("config", "init", "--force")
    assert done.code == 0, done.err
    notes = [line for line in done.out.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2, done.out
    assert "engine: no engine named 'claude' (it comes with shadowclone-claude" in notes[0]
    assert (
        "launcher: no launcher named 'docker' (it comes with shadowclone-docker-launch"
        in (notes[1])
    )
