"""The CODEX_HOME the driver prepares: `config.toml` for each login, the ask server's timeouts,
the moved ChatGPT login, the engine's environment, and the plugin's registration."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from shadowclone.plugin import EngineLimits, EngineTask, load_registry

from shadowclone_codex.config import (
    ASK_SERVER,
    AUTH_FILE,
    BASE_URL_VARIABLE,
    DEFAULT_BASE_URL,
    PROVIDER,
    codex_home,
    config_document,
    engine_env,
    prepare_home,
)
from shadowclone_codex.driver import CodexEngine

ASK = ("/usr/bin/env", "SHADOWCLONE_RUN_FOLDER=/run", "/usr/bin/python3", "-m", "ask")


def make_task(tmp_path: Path, **changes: Any) -> EngineTask:
    defaults: dict[str, Any] = {
        "workspace": tmp_path / "workspace",
        "prompt": "Fix the bug.",
        "ask_command": ASK,
        "env": {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-x"},
        "state_dir": tmp_path / "state",
    }
    return EngineTask(**{**defaults, **changes})


def config(task: EngineTask) -> dict[str, Any]:
    return tomllib.loads(config_document(task))


def test_no_approvals_no_sandbox_no_update_check(tmp_path: Path) -> None:
    data = config(make_task(tmp_path))

    assert data["approval_policy"] == "never"
    assert data["sandbox_mode"] == "danger-full-access"
    assert data["check_for_update_on_startup"] is False
    assert data["cli_auth_credentials_store"] == "file"
    assert "model" not in data
    assert "web_search" not in data


def test_the_workspace_is_never_trusted(tmp_path: Path) -> None:
    """Else Codex loads the repository's own `.codex/` layer (its MCP servers, its hooks); nor
    is the state folder, where an early thread starts before its first turn moves it into the
    workspace."""
    task = make_task(tmp_path)

    projects = config(task)["projects"]

    assert projects[str(task.workspace)] == {"trust_level": "untrusted"}
    assert projects[str(task.state_dir)] == {"trust_level": "untrusted"}


def test_the_ask_server_is_required_approved_and_outlasts_the_ask_wait(tmp_path: Path) -> None:
    task = make_task(tmp_path, limits=EngineLimits(ask_timeout_s=1800))

    server = config(task)["mcp_servers"][ASK_SERVER]

    assert server["command"] == "/usr/bin/env"
    assert server["args"] == list(ASK[1:])
    assert server["required"] is True
    assert server["default_tools_approval_mode"] == "approve"
    assert server["tool_timeout_sec"] > 1800
    assert server["startup_timeout_sec"] >= 10


def test_no_ask_command_no_mcp_server(tmp_path: Path) -> None:
    assert "mcp_servers" not in config(make_task(tmp_path, ask_command=()))


def test_model_and_web_tools_off(tmp_path: Path) -> None:
    data = config(make_task(tmp_path, model="gpt-test", web_tools=False))

    assert data["model"] == "gpt-test"
    assert data["web_search"] == "disabled"


def test_an_api_key_and_a_base_url_make_a_provider_of_their_own(tmp_path: Path) -> None:
    data = config(make_task(tmp_path))

    assert data["model_provider"] == PROVIDER
    assert data["model_providers"][PROVIDER] == {
        "name": "OpenAI (shadowclone)",
        "base_url": "http://127.0.0.1:9/v1",
        "wire_api": "responses",
        "env_key": "OPENAI_API_KEY",
    }


def test_an_api_key_alone_goes_to_openai(tmp_path: Path) -> None:
    provider = config(make_task(tmp_path, env={"OPENAI_API_KEY": "sk-x"}))["model_providers"]

    assert provider[PROVIDER]["base_url"] == DEFAULT_BASE_URL
    assert provider[PROVIDER]["env_key"] == "OPENAI_API_KEY"


def test_a_chatgpt_login_behind_a_gateway_authenticates_with_its_tokens(tmp_path: Path) -> None:
    task = make_task(tmp_path, env={"OPENAI_BASE_URL": "https://gateway.example/v1"})

    provider = config(task)["model_providers"][PROVIDER]

    assert provider["base_url"] == "https://gateway.example/v1"
    assert provider["requires_openai_auth"] is True
    assert "env_key" not in provider


def test_a_chatgpt_login_alone_uses_codex_s_own_provider(tmp_path: Path) -> None:
    data = config(make_task(tmp_path, env={}))

    assert "model_provider" not in data
    assert "model_providers" not in data


def test_prepare_home_writes_the_config_and_moves_the_login_in(tmp_path: Path) -> None:
    task = make_task(tmp_path, env={})
    task.state_dir.mkdir()
    (task.state_dir / AUTH_FILE).write_text('{"auth_mode": "chatgpt"}')

    home = prepare_home(task)

    assert home == codex_home(task)
    assert home.is_relative_to(task.state_dir)
    assert tomllib.loads((home / "config.toml").read_text()) == config(task)
    # Moved, not copied: the tokens rotate, and two copies would race on the refresh.
    assert (home / AUTH_FILE).read_text() == '{"auth_mode": "chatgpt"}'
    assert not (task.state_dir / AUTH_FILE).exists()


def test_prepare_home_keeps_a_login_already_in_place(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    codex_home(task).mkdir(parents=True)
    (codex_home(task) / AUTH_FILE).write_text("in place")
    (task.state_dir / AUTH_FILE).write_text("left over")

    prepare_home(task)

    assert (codex_home(task) / AUTH_FILE).read_text() == "in place"


def test_env_keeps_ours_and_the_task_s_and_points_at_codex_home(tmp_path: Path) -> None:
    task = make_task(tmp_path)

    env = engine_env(task, base={"PATH": "/usr/bin", "HOME": "/home/c", "CODEX_HOME": "/x"})

    assert env["PATH"] == "/usr/bin"
    assert env["HOME"] == "/home/c"
    assert env["OPENAI_API_KEY"] == "sk-x"
    assert env["CODEX_HOME"] == str(codex_home(task))


@pytest.mark.anyio
async def test_a_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    from shadowclone.plugin import PluginUnavailable

    with pytest.raises(PluginUnavailable, match="@openai/codex"):
        await CodexEngine("no-such-codex-program").launch(make_task(tmp_path))


def test_the_plugin_registers_the_codex_engine() -> None:
    registration = load_registry().engine("codex")

    assert registration.logins == ("openai-api-key", "chatgpt-plan")
    assert registration.base_url_env == BASE_URL_VARIABLE
    assert isinstance(registration.factory(), CodexEngine)
