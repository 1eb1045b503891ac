"""The run program's entry point, started as a person would on the host: --help says what it
is, and an argument or a missing run folder is one line and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shadowclone import contract


def run(*args: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, contract.RUN_FOLDER_VARIABLE: str(folder)}
    return subprocess.run(
        [sys.executable, "-m", "shadowclone.run", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_says_what_it_is(flag: str, tmp_path: Path) -> None:
    done = run(flag, folder=tmp_path / "missing")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: shadowclone-run\n")
    assert "shadowclone start OWNER/REPO#NUMBER" in done.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "shadowclone-run: no run folder at {folder} (SHADOWCLONE_RUN_FOLDER): it runs"),
        (("--verbose",), "shadowclone-run: takes no arguments (got '--verbose'); see --help"),
    ],
)
def test_bad_starts_are_one_line(args: tuple[str, ...], said: str, tmp_path: Path) -> None:
    folder = tmp_path / "missing"
    done = run(*args, folder=folder)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(said.format(folder=folder)), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
