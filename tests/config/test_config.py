"""The config file: defaults, paths, edits that keep comments, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from shadowclone.config import Paths, default_paths, init_config, load_config, set_value
from shadowclone.config.schema import Config
from shadowclone.errors import ConfigError


def test_shadowclone_home_puts_everything_under_one_folder(tmp_path: Path) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": str(tmp_path)})
    assert paths.config_file == tmp_path / "config.toml"
    assert paths.secrets_file == tmp_path / "secrets.toml"
    assert paths.clones_dir == tmp_path / "clones"
    assert paths.start_lock.parent == paths.serve_lock.parent == tmp_path / "clones"


def test_without_home_paths_follow_the_platform(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    paths = default_paths({})
    assert paths.config_file == tmp_path / "xdg-config" / "shadowclone" / "config.toml"
    assert paths.clones_dir == tmp_path / "xdg-data" / "shadowclone" / "clones"


def test_the_template_loads_as_the_defaults(tmp_path: Path) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": str(tmp_path)})
    init_config(paths)
    config, resolved = load_config(paths)
    assert config == Config()
    assert resolved == paths
    with pytest.raises(ConfigError, match="already exists"):
        init_config(paths)


def test_set_keeps_comments_and_order(tmp_path: Path) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": str(tmp_path)})
    init_config(paths)
    before = paths.config_file.read_text()
    config = set_value(paths, "parallel_clones", "5")
    set_value(paths, "providers.claude.base_url", '"http://127.0.0.1:9"')
    after = paths.config_file.read_text()
    assert config.parallel_clones == 5
    assert after.replace("parallel_clones = 5", "parallel_clones = 2").startswith(
        before.split("[providers.claude]")[0]
    )
    comments = [line for line in before.splitlines() if line.startswith("#")]
    assert comments == [line for line in after.splitlines() if line.startswith("#")]
    assert load_config(paths)[0].providers["claude"].base_url == "http://127.0.0.1:9"


def test_set_refuses_a_value_that_would_break_the_config(tmp_path: Path) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": str(tmp_path)})
    init_config(paths)
    before = paths.config_file.read_text()
    with pytest.raises(ConfigError, match="parallel_clones: expected an integer"):
        set_value(paths, "parallel_clones", '"many"')
    assert paths.config_file.read_text() == before


def test_paths_in_the_config_move_the_clones_and_the_secrets(tmp_path: Path) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": str(tmp_path)})
    init_config(paths)
    set_value(paths, "paths.clones", f'"{tmp_path / "elsewhere"}"')
    _, resolved = load_config(paths)
    assert resolved.clones_dir == tmp_path / "elsewhere"
    assert resolved.secrets_file == paths.secrets_file


BAD = [
    ("version = 1\nparallel_clones = [", "not valid TOML"),
    ("colour = 'blue'", "colour: unknown key; expected one of version, engine"),
    ("parallel_clones = 'two'", "parallel_clones: expected an integer, got 'two'"),
    ("parallel_clones = true", "parallel_clones: expected an integer, got True"),
    ("parallel_clones = 0", "parallel_clones: expected at least 1, got 0"),
    ("[security]\nstrangers = 'closed'", "security.strangers: expected one of 'model-only'"),
    ("[security]\nstrangers = 1", "security.strangers: expected a string, got 1"),
    ("[github]\napi = 'x'", "github.api: unknown key; expected one of url, api_url"),
    ("[github]\napi_url = 'ftp://x'", "github.api_url: expected an http(s) URL"),
    ("[providers.claude]\nbase_url = 'http://x'", "providers.claude.login: missing"),
    (
        "engine = 'codex'\n[providers.claude]\nlogin = 'claude-api-key'",
        "providers.codex: missing; expected a [providers.codex] table",
    ),
    ("[limits]\nask_timeout_s = 4000", "limits.ask_timeout_s: expected more than 0 and at most"),
    ("[plugins]\ndisabled = 'x'", "plugins.disabled"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_config_is_one_line_naming_file_and_key(
    sc_home: Paths, text: str, message: str
) -> None:
    sc_home.config_file.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(sc_home)
    line = str(error.value)
    assert line.startswith(f"{sc_home.config_file}: ")
    assert message in line
    assert "\n" not in line


def test_a_missing_config_says_how_to_make_one(tmp_path: Path) -> None:
    paths = default_paths({"SHADOWCLONE_HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match="no config file; run `shadowclone config init`"):
        load_config(paths)
