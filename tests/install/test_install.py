"""shadowclone installed as a user installs it (the README's install line, from wheels built of
this checkout standing in for the registry), in a fresh virtual environment that has nothing of
the workspace: the demo runs, and `image build` prepares its context from the installed
distributions alone. The same with the lowest versions every distribution declares. The real
Docker build and the Docker demo from such an install: tests/docker/test_from_install.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
from shadowclone import __version__
from shadowclone_testing.installs import (
    DISTRIBUTIONS,
    build_wheels,
    make_venv,
    run,
    user_env,
    uv,
    uv_pip,
)

SOURCE = Path(__file__).resolve().parents[2]
"""This checkout."""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return build_wheels(SOURCE, tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheels: list[Path]) -> Path:
    bin_dir = make_venv(tmp_path_factory.mktemp("user") / "venv")
    uv_pip(bin_dir, *map(str, wheels))
    return bin_dir


def test_the_readme_install_shows_the_plugins_the_readme_shows(
    installed: Path, tmp_path: Path
) -> None:
    out = run([str(installed / "shadowclone"), "plugins"], env=user_env(tmp_path))
    readme = (SOURCE / "README.md").read_text(encoding="utf-8")
    shown = readme.split("$ shadowclone plugins\n", 1)[1].split("...\n", 1)[0]
    for line in shown.splitlines():
        assert re.sub(r"\s+", " ", line) in re.sub(r"[ \t]+", " ", out), line
    assert "failed" not in out
    site = run(
        [str(installed / "python"), "-c", "import shadowclone; print(shadowclone.__file__)"],
        env=user_env(tmp_path),
    )
    assert str(SOURCE) not in site, "the installed copy, not the checkout"


def readme_install_line() -> list[str]:
    """The README's `uv tool install` line, as an owner types it."""
    readme = (SOURCE / "README.md").read_text(encoding="utf-8")
    block = readme.split("### Install", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    [line] = [line for line in joined.splitlines() if line.startswith("$ uv tool install ")]
    return shlex.split(line.removeprefix("$ "))


def test_the_readme_install_line_installs_what_it_names(wheels: list[Path], tmp_path: Path) -> None:
    """The README's first install, word for word but for where `dist` is: a tool of its own
    with every plugin the README names."""
    argv = readme_install_line()
    assert argv[argv.index("--find-links") + 1] == "dist"
    argv[argv.index("--find-links") + 1] = str(wheels[0].parent)
    env = user_env(tmp_path / "home")
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    env.update(UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"))
    run([uv(), *argv[1:], "--quiet"], env=env)
    out = run([str(tmp_path / "bin" / "shadowclone"), "plugins"], env=env)
    for name in ("claude", "codex", "scripted", "docker", "fake"):
        assert re.search(rf"^{name}\s+\S.*\s+active$", out, re.MULTILINE), out


def test_the_demo_runs_from_the_installed_wheels(installed: Path, tmp_path: Path) -> None:
    out = run([str(installed / "shadowclone"), "demo"], env=user_env(tmp_path), cwd=tmp_path)
    assert re.search(r"pull request http://127\.0\.0\.1:\d+/you/hello/pull/\d+", out)
    assert "demo done in" in out


def test_image_build_from_an_install_puts_the_installed_packages_in_the_context(
    installed: Path, tmp_path: Path
) -> None:
    """No checkout around: the wheels are made of the installed files, and the dependencies
    are pinned at the installed versions. A stand-in docker keeps the context it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kept = tmp_path / "kept"
    docker = bin_dir / "docker"
    docker.write_text(
        "#!/bin/sh\n"
        f'for last; do :; done; rm -rf {kept}; cp -r "$last" {kept}\n'
        f'echo "$@" >> {tmp_path / "calls"}\n'
    )
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    env = user_env(tmp_path / "home")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    out = run(
        [str(installed / "shadowclone"), "image", "build", "--tag", "t:1", "--demo"],
        env=env,
        cwd=tmp_path,
    )
    assert "built t:1 and" in out
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[:5] for c in calls] == [
        ["build", "--tag", "t:1", "--target", "clone"],
        ["build", "--tag", f"shadowclone-demo:{__version__}", "--target", "demo"],
    ]
    assert (kept / "Dockerfile").read_bytes() == (SOURCE / "image" / "Dockerfile").read_bytes()
    assert os.access(kept / "clone-entry", os.X_OK)
    made = sorted(p.name for p in (kept / "packages").glob("*.whl"))
    assert made == sorted(
        f"{name.replace('-', '_')}-{__version__}-py3-none-any.whl"
        for name in DISTRIBUTIONS
        if name != "shadowclone-docker-launch"
    )
    with zipfile.ZipFile(kept / "packages" / f"shadowclone-{__version__}-py3-none-any.whl") as core:
        names = set(core.namelist())
        assert "shadowclone/run/program.py" in names
        assert not any("__pycache__" in n or n.endswith("direct_url.json") for n in names)
        assert not any(n.startswith("shadowclone_testing") for n in names)
    pins = (kept / "packages" / "requirements.txt").read_text().split()
    versions = json.loads(
        run(
            [
                str(installed / "python"),
                "-c",
                "import json, importlib.metadata as m; "
                "print(json.dumps({d.metadata['Name'].lower(): d.version "
                "for d in m.distributions()}))",
            ],
            env=env,
        )
    )
    assert f"attrs=={versions['attrs']}" in pins
    assert not any(p.startswith(("shadowclone", "docker==")) for p in pins), pins
    # The wheels install: pip checks every RECORD hash.
    check = make_venv(tmp_path / "check")
    uv_pip(check, "--no-deps", *map(str, (kept / "packages").glob("*.whl")))


# ------------------------------------------------------------------------ the lowest versions


def test_the_lowest_declared_versions_run_the_demo_and_the_unit_tests(
    wheels: list[Path], tmp_path: Path
) -> None:
    """Every direct dependency at the lowest version its distribution declares (uv's
    lowest-direct resolution), then the demo and the unit tests of the config, the node
    operations, setup and the MCP server against them."""
    bin_dir = make_venv(tmp_path / "lowest")
    requirements = [str(SOURCE / "core" / "pyproject.toml")]
    requirements += [str(p) for p in sorted((SOURCE / "plugins").glob("*/pyproject.toml"))]
    args = ["--resolution", "lowest-direct"]
    for path in requirements:
        args += ["-r", path]
    # The workspace's own come as wheels; the test tools at the versions the workspace uses.
    uv_pip(bin_dir, *args, "--no-sources", "--override", str(_overrides(tmp_path, wheels)))
    uv_pip(bin_dir, "--no-deps", "--reinstall", *map(str, wheels))
    uv_pip(bin_dir, *_test_tools())
    # The kit's pytest plugin checks the fake GitHub with openapi-core, of its `pytest` extra.
    uv_pip(bin_dir, "--resolution", "lowest-direct", *_openapi_core())
    env = user_env(tmp_path / "home")
    out = run([str(bin_dir / "shadowclone"), "demo"], env=env, cwd=tmp_path)
    assert "demo done in" in out
    env["PYTHONPATH"] = str(SOURCE)  # the tests package, not the code under test
    # The checkout's pinned Dev Containers CLI, which the installed package cannot find itself.
    cli = SOURCE / "tools/devcontainer-cli/node_modules/@devcontainers/cli/devcontainer.js"
    if cli.exists():
        env["SHADOWCLONE_DEVCONTAINER_CLI"] = str(cli)
    tests = ["tests/config", "tests/node", "tests/setup", "tests/mcp/test_server.py"]
    tests += ["tests/cli/test_demo.py"]
    done = subprocess.run(
        [str(bin_dir / "python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        capture_output=True,
        text=True,
        cwd=SOURCE,
        env=env,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)


def _overrides(tmp_path: Path, wheels: list[Path]) -> Path:
    """The workspace's own distributions resolve to the wheels, not the index."""
    path = tmp_path / "overrides.txt"
    path.write_text(
        "".join(f"{w.name.split('-')[0].replace('_', '-')} @ {w.as_uri()}\n" for w in wheels)
    )
    return path


def _openapi_core() -> list[str]:
    """openapi-core as the testing kit's `pytest` extra declares it."""
    project = tomllib.loads((SOURCE / "plugins" / "testing" / "pyproject.toml").read_text())
    extra = project["project"]["optional-dependencies"]["pytest"]
    found = [str(r) for r in extra if str(r).startswith("openapi-core")]
    assert found, "the testing kit's pytest extra lacks openapi-core"
    return found


def _test_tools() -> list[str]:
    """pytest and the plugins the test suite uses, at the versions installed here."""
    from importlib.metadata import version

    return [
        f"{name}=={version(name)}"
        for name in ("pytest", "pytest-timeout", "hypothesis", "pyyaml", "packaging")
    ]
