"""`shadowclone service` through the real CLI, against a stand-in `systemctl` on PATH: with no
user session, install explains and leaves nothing; uninstall always removes the unit; status
exits 3 while serve is not running."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from shadowclone_testing.harness import CliResult, run_shadowclone

FAKE_SYSTEMCTL = """#!/bin/sh
# systemctl --user as far as the service uses it; $FAKE_STATE holds what is enabled/running.
[ "$FAKE_NO_BUS" = 1 ] && { echo "Failed to connect to bus: No medium found" >&2; exit 1; }
shift
case "$1" in
  daemon-reload) exit 0 ;;
  enable) touch "$FAKE_STATE/enabled" "$FAKE_STATE/running" ;;
  disable) rm -f "$FAKE_STATE/enabled" "$FAKE_STATE/running" ;;
  restart) touch "$FAKE_STATE/running" ;;
  is-active) [ -e "$FAKE_STATE/running" ] && { echo active; exit 0; }; echo inactive; exit 3 ;;
  status) [ -e "$FAKE_STATE/running" ] && { echo "Active: active (running)"; exit 0; }
          echo "Active: inactive (dead)"; exit 3 ;;
esac
"""

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the systemd service is Linux's"
)


def shadowclone_service(tmp_path: Path, *args: str, no_bus: bool = False) -> tuple[CliResult, Path]:
    bin_dir, state, home = tmp_path / "bin", tmp_path / "state", tmp_path / "owner"
    for folder in (bin_dir, state, home):
        folder.mkdir(exist_ok=True)
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(FAKE_SYSTEMCTL)
    systemctl.chmod(0o755)
    env = {
        "HOME": str(home),
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_STATE": str(state),
        "FAKE_NO_BUS": "1" if no_bus else "0",
    }
    unit = home / ".config/systemd/user/shadowclone.service"
    return run_shadowclone("service", *args, env=env), unit


def test_install_without_a_user_session_explains_and_leaves_nothing(tmp_path: Path) -> None:
    result, unit = shadowclone_service(tmp_path, "install", no_bus=True)
    assert result.code == 1
    [line] = result.err.splitlines()
    assert line.startswith(
        "shadowclone: `systemctl --user daemon-reload` exited 1: Failed to connect to bus"
    )
    assert "no systemd user session" in line and "loginctl enable-linger" in line
    assert line.endswith(f"nothing is installed (removed {unit})")
    assert not unit.exists()
    status, _ = shadowclone_service(tmp_path, "status", no_bus=True)
    assert status.code == 3
    assert "no systemd user session" in status.out


def test_install_status_uninstall(tmp_path: Path) -> None:
    installed, unit = shadowclone_service(tmp_path, "install")
    assert installed.code == 0, installed.err
    assert installed.out.strip() == f"installed at {unit}; serve active"
    status, _ = shadowclone_service(tmp_path, "status", "--json")
    assert status.code == 0 and json.loads(status.out)["running"] is True

    removed, _ = shadowclone_service(tmp_path, "uninstall")
    assert (removed.code, removed.out.strip()) == (0, f"uninstalled: removed {unit}")
    status, _ = shadowclone_service(tmp_path, "status")
    assert status.code == 3 and status.out.startswith("not installed; serve inactive")


def test_uninstall_removes_the_unit_even_when_systemctl_refuses(tmp_path: Path) -> None:
    assert shadowclone_service(tmp_path, "install")[0].code == 0
    removed, unit = shadowclone_service(tmp_path, "uninstall", no_bus=True)
    assert removed.code == 0, removed.err
    assert not unit.exists()
    assert removed.out.startswith(f"uninstalled: removed {unit}; but ")
