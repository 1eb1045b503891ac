"""Before `config init`, every command that only reads works with the defaults and says in one
line what to run next; it writes nothing. A command that needs a config still refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HINT = "no config file yet ({config}): the defaults serve; run `shadowclone config init`"


def shadowclone(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHADOWCLONE_HOME": str(home)}
    return subprocess.run(
        [str(Path(sys.executable).parent / "shadowclone"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [(("list",), 0), (("list", "--all", "--json"), 0), (("config", "show"), 0), (("get", "x"), 2)],
)
def test_reading_commands_work_with_the_defaults(
    tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    home = tmp_path / "home"
    done = shadowclone(home, *args)
    assert done.returncode == code, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("shadowclone: " + HINT.format(config=home / "config.toml"))
    assert "Traceback" not in done.stderr
    assert not home.exists(), "a command that only reads made the home"


def test_config_show_prints_the_defaults(tmp_path: Path) -> None:
    done = shadowclone(tmp_path / "home", "config", "show")
    assert 'launcher = "docker"' in done.stdout and "version = 1" in done.stdout


def test_status_goes_on_with_the_defaults_and_fails_the_config(tmp_path: Path) -> None:
    done = shadowclone(tmp_path / "home", "status")
    assert done.returncode == 1
    [config] = [line for line in done.stdout.splitlines() if line.startswith("FAIL config")]
    assert "no config file; run `shadowclone config init`" in config
    assert "the checks below use the defaults" in config
    assert any(line.startswith("ok   clones") for line in done.stdout.splitlines())


def test_start_still_needs_a_config(tmp_path: Path) -> None:
    done = shadowclone(tmp_path / "home", "start", "acme/app#1")
    assert done.returncode == 2 and "run `shadowclone config init`" in done.stderr
