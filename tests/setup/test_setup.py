"""Setup against the fake GitHub with the fake launcher and a real check clone."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import shadowclone.setup as setup_package
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.config import Paths, load_config, set_value
from shadowclone.environment.devcontainer import READING_PATH
from shadowclone.errors import Refused
from shadowclone.node.checks import CheckReport
from shadowclone.node.setups import environment_dir, read_setup
from shadowclone.plugin import load_registry
from shadowclone_fake_launch.launcher import FakeLauncher
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.harness import CliResult

Cli = Callable[..., CliResult]


@pytest.fixture
def github(tmp_path: Path, sc_home: Paths) -> Iterator[FakeGitHub]:
    with FakeGitHub(tmp_path / "github") as gh:
        set_value(sc_home, "github.url", f'"{gh.url}"')
        set_value(sc_home, "github.api_url", f'"{gh.api_url}"')
        yield gh


def secrets(home: Paths, **values: str) -> None:
    descriptor = os.open(home.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.writelines(f'{key} = """{value}"""\n' for key, value in values.items())


def only_reads(github: FakeGitHub) -> None:
    logged = github.requests()
    assert logged, "the check clone asked GitHub nothing"
    assert not [r for r in logged if r.is_write], "setup wrote to GitHub"


def test_a_private_repository_with_push_is_set_up(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you", name="You")
    github.create_repo("you/app", files={"README.md": "x"}, private=True, default_branch="trunk")
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app", "--check", "make test", "--json")
    assert result.code == 0, result.out + result.err
    summary = json.loads(result.out)
    assert [c["name"] for c in summary["checks"] if not c["passed"]] == []
    record = read_setup(sc_home, "you/app")
    assert record is not None
    assert (record.config_version, record.visibility, record.default_branch) == (
        1,
        "private",
        "trunk",
    )
    assert record.check_commands == ("make test",)
    only_reads(github)
    human = sc_cli("setup", "you/app")
    assert "ok   push permission       you can push to you/app" in human.out
    assert "next: shadowclone start you/app#" in human.out


def test_a_chatgpt_plan_login_is_refused_on_a_public_repository(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you")
    github.create_repo("you/open", files={"README.md": "x"}, private=False)
    set_value(sc_home, "providers.codex.login", '"chatgpt-plan"')
    secrets(sc_home, github_token=token, codex_auth_json='{"auth_mode": "chatgpt"}')
    result = sc_cli("setup", "you/open", "--engine", "codex")
    assert result.code == 1
    assert "FAIL login and visibility" in result.out
    assert result.err.strip() == (
        "shadowclone: setup of you/open refused: the chatgpt-plan login never works on a "
        "public repository"
    )
    assert read_setup(sc_home, "you/open") is None
    only_reads(github)


def test_a_repository_the_owner_cannot_push_to_is_refused(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    github.add_user("boss")
    token = github.add_user("you")
    github.create_repo("boss/app", files={"README.md": "x"})
    github.grant("boss/app", "you", "read")
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "boss/app")
    assert result.code == 1
    assert "FAIL push permission       you cannot push" in result.out
    assert "refused" in result.err
    assert read_setup(sc_home, "boss/app") is None
    only_reads(github)


def test_a_missing_secrets_file_gets_a_private_template(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    github.add_user("you")
    github.create_repo("you/app", files={"README.md": "x"})
    assert not sc_home.secrets_file.exists()
    result = sc_cli("setup", "you/app")
    assert result.code == 1
    assert stat.S_IMODE(sc_home.secrets_file.stat().st_mode) == 0o600
    template = sc_home.secrets_file.read_text()  # the test reads it; shadowclone never does
    assert 'github_token = ""' in template and "# GitHub token" in template
    assert "codex_auth_json = ''''''" in template
    assert f"next: paste github_token into {sc_home.secrets_file}" in result.out
    assert github.requests() == []  # no check clone ran


def test_a_secrets_file_others_can_read_is_refused(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you")
    github.create_repo("you/app", files={"README.md": "x"})
    secrets(sc_home, github_token=token)
    sc_home.secrets_file.chmod(0o644)
    result = sc_cli("setup", "you/app")
    assert result.code == 1
    assert "has mode 0644; others can read it: run `chmod 600" in result.out
    assert github.requests() == []


def test_a_login_without_its_secret_is_reported(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you")
    github.create_repo("you/app", files={"README.md": "x"})
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app", "--engine", "codex")
    assert result.code == 1
    assert "FAIL logins                no value for openai_api_key" in result.out


def test_raising_the_config_version_makes_start_ask_for_setup_again(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you")
    github.create_repo("you/app", files={"README.md": "x"})
    secrets(sc_home, github_token=token)
    assert sc_cli("setup", "you/app").code == 0
    set_value(sc_home, "version", "2")
    refused = sc_cli("start", "you/app#1")
    assert refused.code == 1
    assert "set up under config version 1 and the config is now at version 2" in refused.err
    assert sc_cli("setup", "you/app").code == 0
    assert sc_cli("start", "you/app#1").code == 0


def test_one_repository_in_any_letter_case_is_one_target_shown_as_github_spells_it(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("You")
    github.create_repo("You/App", files={"README.md": "x"})
    secrets(sc_home, github_token=token)
    assert sc_cli("setup", "you/app").code == 0
    record = read_setup(sc_home, "YOU/APP")
    assert record is not None
    assert record.repo == "You/App"
    first = sc_cli("start", "you/app#1")
    assert first.code == 0, first.err
    assert "on You/App#1" in first.out
    for spelling in ("You/App", "YOU/APP", "you/APP"):
        again = sc_cli("start", f"{spelling}#1")
        assert again.code == 1
        assert "You/App#1 already has an active clone" in again.err
    assert "You/App#1" in sc_cli("list").out


def test_the_secrets_template_is_written_before_docker_is_needed(
    sc_cli: Cli, sc_home: Paths, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With no Docker engine yet, the first setup still writes the template: the owner fills it
    in while getting Docker ready, and the next setup names Docker."""
    set_value(sc_home, "launcher", '"docker"')
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    first = sc_cli("setup", "you/app")
    assert first.code == 1
    assert stat.S_IMODE(sc_home.secrets_file.stat().st_mode) == 0o600
    assert "FAIL secrets file" in first.out and "launcher" not in first.out
    secrets(sc_home, github_token="ghp_x")
    second = sc_cli("setup", "you/app")
    assert second.code == 1
    lines = [line for line in second.out.splitlines() if line.startswith(("ok", "FAIL"))]
    assert lines[-2].startswith("ok   secrets file")
    assert lines[-1].startswith("FAIL launcher")


def test_setup_shows_the_check_clones_progress_while_it_runs(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you")
    github.create_repo("you/app", files={"README.md": "x"})
    secrets(sc_home, github_token=token)
    out = sc_cli("setup", "you/app").out.splitlines()
    started = next(i for i, line in enumerate(out) if "check clone           starting" in line)
    checking = next(i for i, line in enumerate(out) if "checking you/app for the" in line)
    verdict = next(i for i, line in enumerate(out) if line.startswith("ok   check clone"))
    assert started < checking < verdict
    assert out.index(next(line for line in out if line.startswith("ok   launcher"))) < started


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    user=st.sampled_from([None, "", "you"]),
    visibility=st.sampled_from([None, "", "private"]),
    default_branch=st.sampled_from([None, "", "main"]),
    can_push=st.sampled_from([None, True]),
)
def test_no_check_passes_on_an_empty_value_from_the_check_clone(
    sc_home: Paths,
    monkeypatch: pytest.MonkeyPatch,
    user: str | None,
    visibility: str | None,
    default_branch: str | None,
    can_push: bool | None,
) -> None:
    """Whatever the check clone leaves out, no check passes showing an empty value, and the
    setup record is written only when everything it holds was said."""
    report = CheckReport(
        "you/app",
        full_name="you/app",
        user=user,
        visibility=visibility,
        default_branch=default_branch,
        can_push=can_push,
    )
    monkeypatch.setattr(setup_package, "run_check_clone", lambda *args, **kwargs: report)
    shutil.rmtree(sc_home.setup_dir, ignore_errors=True)  # no record from an earlier example
    secrets(sc_home, github_token="ghp_x")
    config, paths = load_config(sc_home)
    summary = setup_package.setup_repository(
        config, paths, load_registry(config.plugins.disabled), "you/app"
    )
    for check in summary.checks:
        if check.passed:
            assert "None" not in check.detail and ", default branch ," not in check.detail
            assert not check.detail.rstrip().endswith(("as", "branch")), check
    complete = bool(user and visibility and default_branch) and can_push is True
    assert summary.ok == complete
    assert (read_setup(sc_home, "you/app") is not None) == complete


DEVCONTAINER_FILES = {
    "README.md": "x",
    ".devcontainer/devcontainer.json": (
        '// a dev container\n{"build": {"dockerfile": "Dockerfile", "args": {"V": "1"},},\n'
        ' "postCreateCommand": "make deps",\n'
        ' "features": {"ghcr.io/devcontainers/features/go:1": {}}}\n'
    ),
    ".devcontainer/Dockerfile": "FROM debian:bookworm\nCOPY tools/ /tools/\n",
    ".devcontainer/tools/setup.sh": "echo tools\n",
    "src/main.go": "package main\n",
}


def test_setup_keeps_the_environment_the_repository_declares(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub, sc_devcontainer_cli: Path
) -> None:
    """The check clone copies the declaration, its Dockerfile and the build context (only
    that), the reference CLI's reading kept beside them; a later setup keeps what the
    repository declares then, and nothing of before."""
    token = github.add_user("you", name="You")
    github.create_repo("you/app", files=DEVCONTAINER_FILES, private=True)
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app")
    assert result.code == 0, result.out + result.err
    # The launcher prepares the environment's image now; the fake one runs none.
    assert "prepare   note     the fake launcher runs no image" in result.out
    assert "ok   environment           .devcontainer/devcontainer.json: clones run in" in (
        result.out
    )
    record = read_setup(sc_home, "you/app")
    assert record is not None and record.environment == ".devcontainer/devcontainer.json"
    kept = environment_dir(sc_home, "you/app")
    found = {
        str(path.relative_to(kept)): path.read_text() for path in kept.rglob("*") if path.is_file()
    }
    reading = json.loads(found.pop(READING_PATH))
    assert found == {k: v for k, v in DEVCONTAINER_FILES.items() if k.startswith(".devcontainer")}
    assert reading["configuration"]["postCreateCommand"] == "make deps"
    assert (
        "ok   declaration           read .devcontainer/devcontainer.json; features: "
        "ghcr.io/devcontainers/features/go:1; run in each clone's workspace before the engine: "
        "postCreateCommand"
    ) in result.out
    only_reads(github)
    shown = sc_cli("env", "show", "you/app", "--json")
    assert shown.code == 0, shown.err
    described = json.loads(shown.out)
    assert described["environment"] == ".devcontainer/devcontainer.json"
    assert (described["dockerfile"], described["context"]) == (
        ".devcontainer/Dockerfile",
        ".devcontainer",
    )
    assert (described["setup"], described["build_args"]) == ([], {"V": "1"})
    assert described["lifecycle"] == [["postCreateCommand", "make deps"]]
    assert described["workspace_folder"] == "/workspaces/app"
    assert record.lifecycle.post_create == ("make deps",)
    assert (described["ignored"], described["not_applied"]) == ([], {})
    assert described["features"] == ["ghcr.io/devcontainers/features/go:1"]
    human = sc_cli("env", "show", "you/app").out
    assert (
        "command     postCreateCommand: make deps (in the workspace)" in human
        and "workspace   /workspaces/app" in human
        and "feature     ghcr.io/devcontainers/features/go:1" in human
    )
    image_only = '{"image": "debian:bookworm"}'
    github.commit("you/app", "main", {".devcontainer/devcontainer.json": image_only}, author="you")
    assert sc_cli("setup", "you/app").code == 0
    after = {str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file()}
    assert after == {".devcontainer/devcontainer.json", READING_PATH}, "the old context was kept"
    assert "base        the image debian:bookworm" in sc_cli("env", "show", "you/app").out
    missing = sc_cli("env", "show", "you/other")
    assert missing.code == 1 and "you/other is not set up here" in missing.err


def test_a_broken_devcontainer_is_one_line_naming_the_file_and_the_key(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you", name="You")
    broken = '{"build": {"dockerfile": "../../../Dockerfile"}}'
    github.create_repo(
        "you/app", files={"README.md": "x", ".devcontainer/devcontainer.json": broken}, private=True
    )
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app")
    assert result.code != 0
    assert (
        ".devcontainer/devcontainer.json: build.dockerfile: expected a path inside the repository"
        in result.out
    ), result.out
    assert read_setup(sc_home, "you/app") is None


@pytest.mark.parametrize(
    ("files", "line"),
    [
        (
            {".devcontainer/devcontainer.json": '{"dockerComposeFile": "c.yml", "service": "a"}'},
            ".devcontainer/devcontainer.json: dockerComposeFile: .devcontainer/c.yml is not a "
            "file of the repository",
        ),
        (
            {".devcontainer.json": '{"dockerFile": "Dockerfile"}'},
            ".devcontainer.json: dockerFile: Dockerfile is not a file of the repository",
        ),
        (
            {
                ".devcontainer/go/devcontainer.json": '{"image": "golang"}',
                ".devcontainer/py/devcontainer.json": '{"image": "python"}',
            },
            ".devcontainer: 2 dev container configurations and no default one "
            "(.devcontainer/go/devcontainer.json, .devcontainer/py/devcontainer.json): choose "
            "one with `shadowclone setup OWNER/REPO --devcontainer PATH`",
        ),
        (
            {".devcontainer/devcontainer.json": '{"image": "debian", "features": {"./gone": {}}}'},
            ".devcontainer/devcontainer.json: the local feature .devcontainer/gone is not a "
            "folder of the repository",
        ),
        (
            {".devcontainer/devcontainer.json": '{"image": "debian", "features": {"../../x": {}}}'},
            ".devcontainer/devcontainer.json: features.../../x: expected a path inside the "
            "repository",
        ),
    ],
)
def test_a_devcontainer_that_cannot_work_is_refused_in_one_line(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub, files: dict[str, str], line: str
) -> None:
    token = github.add_user("you", name="You")
    github.create_repo("you/app", files={"README.md": "x", **files}, private=True)
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app", "--no-build")
    assert result.code != 0 and line in result.out, result.out
    assert read_setup(sc_home, "you/app") is None


def test_setup_keeps_a_local_feature_with_its_configuration(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub, sc_devcontainer_cli: Path
) -> None:
    """A feature kept beside the configuration (`./NAME`) is copied with it, whole, as a
    Dockerfile's context is: the image's build installs it."""
    feature = {
        ".devcontainer/devcontainer.json": '{"image": "debian", "features": {"./greet": {}}}',
        ".devcontainer/greet/devcontainer-feature.json": '{"id": "greet", "version": "1.0.0"}',
        ".devcontainer/greet/install.sh": "#!/bin/sh\necho hi > /etc/greet\n",
        ".devcontainer/greet/lib/words.txt": "hi\n",
        ".devcontainer/other/notes.md": "not kept\n",
    }
    token = github.add_user("you", name="You")
    github.create_repo("you/app", files={"README.md": "x", **feature}, private=True)
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app", "--no-build")
    assert result.code == 0, result.out + result.err
    assert "features: ./greet" in result.out
    kept = environment_dir(sc_home, "you/app")
    found = {str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file()}
    assert found == set(feature) - {".devcontainer/other/notes.md"} | {READING_PATH}
    described = json.loads(sc_cli("env", "show", "you/app", "--json").out)
    assert described["features"] == ["./greet"]


def test_one_of_several_configurations_is_chosen_and_its_variables_read(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub, sc_devcontainer_cli: Path
) -> None:
    """`.devcontainer/NAME/devcontainer.json` is found and chosen with --devcontainer; the
    reference CLI substitutes its variables (the owner's own environment never reaches it)."""
    python = {
        "image": "python:3.12",
        "containerEnv": {"HOME_SEEN": "${localEnv:HOME}", "WS": "${containerWorkspaceFolder}"},
        "postCreateCommand": "cd ${containerWorkspaceFolderBasename} && pip install -e .",
        "postStartCommand": "make serve",
        "forwardPorts": [8000],
    }
    files = {
        "README.md": "x",
        ".devcontainer.json": '{"image": "debian:bookworm"}',
        ".devcontainer/py/devcontainer.json": json.dumps(python),
    }
    token = github.add_user("you", name="You")
    github.create_repo("you/app", files=files, private=True)
    secrets(sc_home, github_token=token)
    result = sc_cli(
        "setup", "you/app", "--no-build", "--devcontainer", ".devcontainer/py/devcontainer.json"
    )
    assert result.code == 0, result.out + result.err
    assert (
        "read .devcontainer/py/devcontainer.json (also found: .devcontainer.json; choose with "
        "--devcontainer); run in each clone's workspace before the engine: postCreateCommand, "
        "postStartCommand" in result.out
    )
    described = json.loads(sc_cli("env", "show", "you/app", "--json").out)
    assert described["env"] == {"HOME_SEEN": "", "WS": "/workspaces/app"}
    assert described["setup"] == []
    assert described["lifecycle"] == [
        ["postCreateCommand", "cd app && pip install -e ."],
        ["postStartCommand", "make serve"],
    ]
    assert described["not_applied"] == {}
    assert described["ignored"] == ["forwardPorts"]
    human = sc_cli("env", "show", "you/app").out
    assert "also found  .devcontainer.json (not read" in human
    assert "command     postStartCommand: make serve (in the workspace)" in human
    default = sc_cli("setup", "you/app", "--no-build")
    assert default.code == 0 and "read .devcontainer.json (also found" in default.out


def test_an_environment_that_cannot_be_built_fails_setup_in_one_line(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: object, spec: object, say: object, cancel: object) -> object:
        raise Refused("docker could not build you/app's environment (exit 1)")

    monkeypatch.setattr(FakeLauncher, "prepare", broken)
    token = github.add_user("you", name="You")
    toml = 'image = "debian:bookworm"\nsetup = ["false"]\n'
    github.create_repo(
        "you/app", files={"README.md": "x", ".shadowclone/environment.toml": toml}, private=True
    )
    secrets(sc_home, github_token=token)
    result = sc_cli("setup", "you/app")
    assert result.code == 1
    assert (
        "FAIL environment           .shadowclone/environment.toml: docker could not build "
        "you/app's environment (exit 1)" in result.out
    ), result.out
    assert "Traceback" not in result.out + result.err
    # Set up all the same (serve builds it again before a launch), and --no-build skips it.
    assert read_setup(sc_home, "you/app") is not None
    skipped = sc_cli("setup", "you/app", "--no-build")
    assert skipped.code == 0 and "FAIL" not in skipped.out
    assert "ok   environment" not in skipped.out


def test_the_checks_an_environment_declares_join_the_setups_own(
    sc_cli: Cli, sc_home: Paths, github: FakeGitHub
) -> None:
    token = github.add_user("you", name="You")
    toml = 'image = "debian:bookworm"\nchecks = ["make test", "make lint"]\n'
    github.create_repo(
        "you/app", files={"README.md": "x", ".shadowclone/environment.toml": toml}, private=True
    )
    secrets(sc_home, github_token=token)
    assert sc_cli("setup", "you/app", "--check", "make lint").code == 0
    record = read_setup(sc_home, "you/app")
    assert record is not None and record.environment == ".shadowclone/environment.toml"
    assert record.check_commands == ("make lint", "make test")
