"""Fresh virtual environments with shadowclone installed as a user installs it: from the wheels
`uv build` makes of a checkout (standing in for the registry), third-party dependencies from
the package index (or uv's cache), nothing from the workspace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

DISTRIBUTIONS = (
    "shadowclone",
    "shadowclone-claude",
    "shadowclone-codex",
    "shadowclone-docker-launch",
    "shadowclone-fake-launch",
    "shadowclone-testing",
)
"""The README's install line, and the fake launcher the testing kit brings with it."""


def uv() -> str:
    return shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def run(argv: list[str], *, timeout: float = 900, **kwargs: object) -> str:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )  # type: ignore[call-overload]
    assert done.returncode == 0, (
        f"{argv[:4]} exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return str(done.stdout)


def build_wheels(source: Path, out: Path) -> list[Path]:
    """The wheel of every distribution of the workspace at `source`."""
    run(
        [
            uv(),
            "build",
            "--project",
            str(source),
            "--all-packages",
            "--wheel",
            "--out-dir",
            str(out),
            "-q",
        ]
    )
    wheels = sorted(out.glob("*.whl"))
    made = {wheel.name.partition("-")[0].replace("_", "-") for wheel in wheels}
    assert made >= set(DISTRIBUTIONS), wheels  # and the optional ones (the swarm launcher)
    return [
        wheel for wheel in wheels if wheel.name.partition("-")[0].replace("_", "-") in DISTRIBUTIONS
    ]


def make_venv(folder: Path) -> Path:
    """A new virtual environment; returns its bin folder."""
    run([uv(), "venv", "--quiet", "--python", sys.executable, str(folder)])
    return folder / "bin"


def uv_pip(bin_dir: Path, *args: str) -> str:
    env = {
        k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"}
    }
    return run(
        [uv(), "pip", "install", "--quiet", "--python", str(bin_dir / "python"), *args], env=env
    )


def user_env(home: Path) -> dict[str, str]:
    """The environment of a user who has nothing of this checkout: no workspace venv on PATH,
    no PYTHONPATH, a home of their own."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["SHADOWCLONE_HOME"] = str(home)
    return env
