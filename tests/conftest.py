"""Fixtures every test may use: a temporary shadowclone home with a config, a node, setup
records written through the same code as `shadowclone setup`, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from shadowclone.cli import main
from shadowclone.config import HOME_VARIABLE, Paths, default_paths, init_config, set_value
from shadowclone.node.local import LocalNode, local_node
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import write_setup

IN_CI = os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> None:
    """Outside CI a missing tool skips with its reason; under CI=true it fails the test."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """A fresh SHADOWCLONE_HOME with a config for the scripted engine and the fake launcher."""
    root = tmp_path / "home"
    monkeypatch.setenv(HOME_VARIABLE, str(root))
    paths = default_paths()
    init_config(paths)
    for key, value in (
        ("providers.scripted.login", '"no-login"'),
        ("engine", '"scripted"'),
        ("launcher", '"fake"'),
        ("daily_clones", "1000"),
    ):
        set_value(paths, key, value)
    return paths


@pytest.fixture
def node(home: Paths) -> LocalNode:
    return local_node(home)


def set_up(paths: Paths, repo: str = "acme/app", **changes: Any) -> SetupRecord:
    """Write a setup record the way `shadowclone setup` does."""
    record = attrs.evolve(
        SetupRecord(repo=repo, config_version=1, engine="scripted", login="no-login"), **changes
    )
    write_setup(paths, record)
    return record


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(home: Paths, capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., CliResult]]:
    """Run `shadowclone ARGS...` in this process; returns exit code, stdout and stderr."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    yield run


def run_shadowclone(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run the installed `shadowclone` command in a new process."""
    done = subprocess.run(
        [sys.executable, "-c", "from shadowclone.cli import entry; entry()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


ENGINES_BIN = Path(__file__).resolve().parents[1] / "tools" / "engines" / "node_modules" / ".bin"
"""Where `scripts/install-engines` puts the pinned `claude` and `codex`."""


@pytest.fixture
def folder(tmp_path: Path) -> RunFolder:
    """An empty run folder, as the run program sees it inside a clone."""
    path = tmp_path / "clone"
    path.mkdir()
    return RunFolder(path)


@pytest.fixture
def anyio_backend() -> str:
    """The drivers use asyncio subprocesses."""
    return "asyncio"


@pytest.fixture
def engines_on_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the pinned engine CLIs first on PATH and return their folder.

    A test class names the programs it needs in `engine_binaries` (default: both). When one is
    missing the test is skipped with what to run, except under CI=true, where it fails.
    """
    names: tuple[str, ...] = getattr(request.cls, "engine_binaries", ("claude", "codex"))
    missing = [name for name in names if not (ENGINES_BIN / name).exists()]
    if missing:
        reason = f"{', '.join(missing)} not installed in {ENGINES_BIN}: run scripts/install-engines"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.setenv("PATH", f"{ENGINES_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return ENGINES_BIN


@pytest.fixture(scope="session", autouse=True)
def _temporary_folders_reachable_by_the_engine(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run as root, the fake launcher runs each engine as a user of its own, which must reach
    the clone's run folder: pytest makes its temporary folders closed to other users."""
    if os.geteuid() != 0:
        return
    base = tmp_path_factory.getbasetemp()
    for folder in (base, base.parent):
        folder.chmod(folder.stat().st_mode | 0o011)


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """pytest's own, made searchable by other users when run as root (see above)."""
    if os.geteuid() == 0:
        tmp_path.chmod(tmp_path.stat().st_mode | 0o011)
    return tmp_path
