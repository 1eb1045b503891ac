"""Helpers for tests of shadowclone and its plugins: a shadowclone home for the scripted engine
and the fake launcher, setup records, the CLI in this process or a new one, the engine CLIs.

The pytest plugin (`shadowclone_testing.pytest_plugin`) turns these into fixtures; tests and
benchmarks import the plain functions from here.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from shadowclone.config import HOME_VARIABLE, Paths, default_paths, init_config, set_value
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import write_setup

IN_CI = os.environ.get("CI", "").lower() == "true"

ENGINES_BIN_VARIABLE = "SHADOWCLONE_ENGINES_BIN"
ENGINES_FOLDER = Path("tools", "engines", "node_modules", ".bin")
"""Where `scripts/install-engines` puts the pinned `claude` and `codex`, in a checkout."""

SCRIPTED_CONFIG: tuple[tuple[str, str], ...] = (
    ("providers.scripted.login", '"no-login"'),
    ("engine", '"scripted"'),
    ("launcher", '"fake"'),
    ("daily_clones", "1000"),
)
"""The config of a test home: the scripted engine on the fake launcher, no daily limit to meet."""


def skip_or_fail(reason: str) -> None:
    """Outside CI a missing tool skips with its reason; under CI=true it fails the test."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def engines_bin(environ: Mapping[str, str] = os.environ) -> Path:
    """The folder of the engine CLIs the tests drive: SHADOWCLONE_ENGINES_BIN, or the checkout's
    `tools/engines/node_modules/.bin` found from the current folder up."""
    named = environ.get(ENGINES_BIN_VARIABLE)
    if named:
        return Path(named)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / ENGINES_FOLDER).is_dir():
            return folder / ENGINES_FOLDER
    return here / ENGINES_FOLDER


def make_home(root: Path, *settings: tuple[str, str]) -> Paths:
    """A shadowclone home at `root` with the scripted config, then `settings` (key, TOML value)."""
    paths = default_paths({HOME_VARIABLE: str(root)})
    init_config(paths)
    for key, value in (*SCRIPTED_CONFIG, *settings):
        set_value(paths, key, value)
    return paths


def set_up(paths: Paths, repo: str = "acme/app", **changes: Any) -> SetupRecord:
    """Write a setup record the way `shadowclone setup` does."""
    record = attrs.evolve(
        SetupRecord(repo=repo, config_version=1, engine="scripted", login="no-login"), **changes
    )
    write_setup(paths, record)
    return record


CLI_PROGRAM = "from shadowclone.cli import entry; entry()"
"""`shadowclone` in a new process of this Python."""


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str


def in_terminal(*args: str, env: dict[str, str] | None = None, code: int = 0) -> str:
    """Run the CLI with its stdout on a pseudo-terminal, as when the owner types it."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", CLI_PROGRAM, *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            env={**os.environ, "COLUMNS": "200", **(env or {})},
            timeout=120,
            check=False,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == code, done.stderr
    return b"".join(chunks).decode().replace("\r\n", "\n")


def run_shadowclone(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run the installed `shadowclone` command in a new process."""
    done = subprocess.run(
        [sys.executable, "-c", CLI_PROGRAM, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def reachable_by_other_users(folder: Path) -> None:
    """Run as root, the fake launcher runs each engine as a user of its own, which must reach
    the clone's run folder: make `folder` searchable by others."""
    if os.geteuid() == 0:
        folder.chmod(folder.stat().st_mode | 0o011)
