"""The fixtures a test of shadowclone or of a plugin needs. pytest does not load this plugin
by itself: a project opts in from its top conftest.py (the one in pytest's rootdir) with

    pytest_plugins = ["shadowclone_testing.pytest_plugin"]

Every fixture it offers carries the prefix `sc_`, so none shadows or takes a project's own:

- `sc_home`: a fresh SHADOWCLONE_HOME (the scripted engine, the fake launcher) for this test;
- `sc_node`: the local node over it; `sc_cli`: `shadowclone ARGS...` run in this process;
- `sc_folder`: an empty run folder, as the run program sees it inside a clone;
- `sc_scripts` and `sc_ready`: the fake launcher's test scripts (`sc_ready` also sets up
  acme/app);
- `sc_owner`: the owner of you/app on a fake GitHub, for whole clones through the CLI;
- `sc_engines_on_path`: the engine CLIs a test class names in `engine_binaries`, first on PATH;
- `sc_devcontainer_cli`: the pinned Dev Containers CLI;
- `sc_registry`: a Docker registry of the test's own on loopback (`registry.LocalRegistry`).

It also makes pytest's own `tmp_path` (and the folders above it) reachable by the fake
launcher's engine user when run as root.

Every fake GitHub a test starts in this process checks its REST exchanges against GitHub's
OpenAPI description (fakes/github/openapi.py), and a test whose exchanges broke it fails.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from shadowclone.config import HOME_VARIABLE, Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import SCRIPTS_VARIABLE

from shadowclone_testing.fakes.github import openapi
from shadowclone_testing.harness import (
    CliResult,
    engines_bin,
    make_home,
    reachable_by_other_users,
    set_up,
    skip_or_fail,
)
from shadowclone_testing.owner import Owner, an_owner
from shadowclone_testing.registry import PROGRAM_VARIABLE as REGISTRY_BIN
from shadowclone_testing.registry import LocalRegistry
from shadowclone_testing.registry import find_program as find_registry
from shadowclone_testing.serving import Scripts, remove_all


@pytest.fixture
def sc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """A fresh SHADOWCLONE_HOME with a config for the scripted engine and the fake launcher."""
    root = tmp_path / "home"
    monkeypatch.setenv(HOME_VARIABLE, str(root))
    return make_home(root)


@pytest.fixture
def sc_node(sc_home: Paths) -> LocalNode:
    return local_node(sc_home)


@pytest.fixture
def sc_cli(sc_home: Paths, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `shadowclone ARGS...` in this process; returns exit code, stdout and stderr."""
    from shadowclone.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def sc_folder(tmp_path: Path) -> RunFolder:
    """An empty run folder, as the run program sees it inside a clone."""
    path = tmp_path / "clone"
    path.mkdir()
    return RunFolder(path)


@pytest.fixture
def sc_engines_on_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the engine CLIs first on PATH and return their folder (`harness.engines_bin`).

    A test class names the programs it needs in `engine_binaries` (default: both). When one is
    missing the test is skipped with what to run, except under CI=true, where it fails.
    """
    names: tuple[str, ...] = getattr(request.cls, "engine_binaries", ("claude", "codex"))
    found = engines_bin()
    missing = [name for name in names if not (found / name).exists()]
    if missing:
        skip_or_fail(
            f"{', '.join(missing)} not installed in {found}: run scripts/install-engines "
            "or set SHADOWCLONE_ENGINES_BIN"
        )
    monkeypatch.setenv("PATH", f"{found}{os.pathsep}{os.environ.get('PATH', '')}")
    return found


@pytest.fixture
def sc_devcontainer_cli() -> Path:
    """The pinned Dev Containers CLI setup reads devcontainer.json with. When it is missing the
    test is skipped with what to run, except under CI=true, where it fails."""
    from shadowclone.environment import devcontainer
    from shadowclone.errors import BadInput

    program = devcontainer.find_cli()
    try:
        if program is None:
            raise BadInput("no Dev Containers CLI")
        devcontainer.checked_command(program)
    except BadInput as error:
        skip_or_fail(
            f"{error}: run scripts/install-devcontainer-cli or set {devcontainer.CLI_VARIABLE}"
        )
    assert program is not None
    return program


REGISTRY_PORT = 5117
"""The port `sc_registry` takes when it is free: the same from one session to the next, so
that what a test builds from the registry's contents is found in Docker's build cache."""


@pytest.fixture
def sc_registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    """A registry of this test's own on 127.0.0.1 (`localhost:PORT`); skipped with what to
    run when there is no registry program, except under CI=true, where it fails."""
    if find_registry() is None:
        skip_or_fail(f"no docker-registry: run scripts/install-registry or set {REGISTRY_BIN}")
    with LocalRegistry(tmp_path / "registry", port=REGISTRY_PORT) as registry:
        yield registry


@pytest.fixture
def sc_scripts(
    sc_home: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Scripts]:
    """Scripts for the clones of `sc_home`; every fake clone still there is removed afterwards."""
    found = Scripts(tmp_path / "scripts.json", tmp_path / "starts.jsonl")
    found.save()
    monkeypatch.setenv(SCRIPTS_VARIABLE, str(found.path))
    yield found
    remove_all(FakeLauncher(default_state_dir()))


@pytest.fixture
def sc_ready(sc_home: Paths, sc_scripts: Scripts) -> Scripts:
    """Scripts, with acme/app set up."""
    set_up(sc_home)
    return sc_scripts


@pytest.fixture
def sc_owner(sc_home: Paths, sc_cli: Callable[..., CliResult], tmp_path: Path) -> Iterator[Owner]:
    """The owner of you/app on a fake GitHub, with serve started by `sc_owner.serving()`."""
    with an_owner(sc_home, sc_cli, tmp_path) as found:
        yield found


@pytest.fixture(scope="session", autouse=True)
def _sc_temporary_folders_reachable_by_the_engine(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest makes its temporary folders closed to other users; the fake launcher's engine
    user must reach the clone's run folder (see `harness.reachable_by_other_users`)."""
    base = tmp_path_factory.getbasetemp()
    for each in (base, base.parent):
        reachable_by_other_users(each)


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """pytest's own, made searchable by other users when run as root (see above)."""
    reachable_by_other_users(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def _sc_fake_github_kept_to_openapi() -> Iterator[None]:
    """Fail the test if a fake GitHub answered or was asked something GitHub's OpenAPI
    description does not allow while it ran (violations before it belong to others)."""
    for fake in openapi.watched():
        fake.take_openapi_violations()
    yield
    found = [v for fake in openapi.watched() for v in fake.take_openapi_violations()]
    if found:
        pytest.fail(
            "the fake GitHub broke GitHub's OpenAPI description:\n" + "\n".join(found),
            pytrace=False,
        )


def pytest_configure(config: pytest.Config) -> None:
    openapi.enable()
    for marker in (
        "docker: needs a Docker engine",
        "engines: drives the real Claude Code and Codex CLIs",
        "slow: takes more than a few seconds",
    ):
        config.addinivalue_line("markers", marker)
