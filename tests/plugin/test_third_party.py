"""A third-party plugin is found through its entry point and used; broken plugins are
reported with their distribution and version while the others keep working."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from shadowclone_testing.harness import run_shadowclone
from shadowclone_testing.installs import build_wheels, make_venv, run, user_env, uv_pip

EXAMPLE = Path(__file__).parents[1] / "plugin_example"
SOURCE = Path(__file__).resolve().parents[2]
"""This checkout."""


def _uv() -> str:
    return str(Path(sys.executable).with_name("uv"))


@pytest.fixture(scope="module")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin package, built and installed into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [_uv(), "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True,
        timeout=300,
        env={**os.environ, "UV_PYTHON": sys.executable},
    )
    return target


def plugins_json(site: Path) -> list[dict[str, str]]:
    result = run_shadowclone("plugins", "--json", env={"PYTHONPATH": str(site)})
    assert result.code == 0, result.err
    rows: list[dict[str, str]] = json.loads(result.out)
    return rows


def test_an_installed_plugin_is_discovered(example_site: Path) -> None:
    assert list(example_site.glob("shadowclone_example-1.2.0.dist-info"))
    rows = plugins_json(example_site)
    example = [r for r in rows if r["name"] == "no-breakpoints"]
    assert example == [
        {
            "name": "no-breakpoints",
            "family": "review stage",
            "summary": "fails when the change adds a breakpoint() call",
            "distribution": "shadowclone-example",
            "version": "1.2.0",
            "status": "active",
            "reason": "",
        }
    ]


def test_an_installed_plugin_is_used(example_site: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "app.py").write_text("print('hi')\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "app.py").write_text("breakpoint()\nprint('hi')\n")
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from shadowclone.plugin import load_registry, ReviewContext
        stages = load_registry().review_stages()
        context = ReviewContext(workspace=Path({str(repo)!r}), base_ref="HEAD", owner_wrote=False)
        for stage in stages:
            result = stage.factory().run(context)
            print(stage.name, result.passed, result.summary)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(example_site)},
        check=True,
    )
    assert "no-breakpoints False 1 breakpoint() calls added" in done.stdout.splitlines()
    # Built-in stages run first (by order), and code-running ones skip a stranger's code.
    assert done.stdout.splitlines()[0].startswith("toolchain True skipped")


def fake_distribution(site: Path, name: str, version: str, entry: str, code: str) -> None:
    """A minimal installed distribution: dist-info with an entry point, and its module."""
    module = f"mod_{name.replace('-', '_')}"
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[shadowclone]\n{entry} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(code))


HEADER = """
from shadowclone.plugin import hookimpl, LauncherRegistration, EngineRegistration
"""


def test_broken_plugins_are_reported_and_the_others_keep_working(tmp_path: Path) -> None:
    site = tmp_path / "site"
    fake_distribution(site, "broken-import", "0.1", "broken", "import no_such_module_here\n")
    fake_distribution(
        site,
        "wrong-type",
        "0.2",
        "wrong",
        HEADER + "@hookimpl\ndef shadowclone_launchers():\n    return ['docker']\n",
    )
    fake_distribution(
        site,
        "misspelled",
        "0.3",
        "misspelled",
        HEADER + "@hookimpl\ndef shadowclone_launcher():\n    return []\n",
    )
    fake_distribution(
        site,
        "raises",
        "0.4",
        "raises",
        HEADER + "@hookimpl\ndef shadowclone_engines():\n    raise RuntimeError('boom')\n",
    )
    twin = HEADER + (
        "@hookimpl\ndef shadowclone_launchers():\n"
        "    return [LauncherRegistration(name='twin', summary='s', factory=lambda: None)]\n"
    )
    fake_distribution(site, "twin-a", "1.0", "twin_a", twin)
    fake_distribution(site, "twin-b", "2.0", "twin_b", twin)
    rows = {(r["name"], r["distribution"]): r for r in plugins_json(site)}

    def failed(name: str, distribution: str, version: str, reason: str) -> None:
        row = rows[(name, distribution)]
        assert (row["status"], row["version"]) == ("failed", version)
        assert reason in row["reason"]

    failed("broken", "broken-import", "0.1", "failed to import: ModuleNotFoundError")
    failed("wrong", "wrong-type", "0.2", "returned str, expected LauncherRegistration")
    failed("misspelled", "misspelled", "0.3", "unknown hook 'shadowclone_launcher'")
    failed("raises", "raises", "0.4", "shadowclone_engines raised RuntimeError: boom")
    for distribution, version in (("twin-a", "1.0"), ("twin-b", "2.0")):
        failed("twin", distribution, version, "claimed by twin-a 1.0 and twin-b 2.0")
    working = {name for (name, _), r in rows.items() if r["status"] == "active"}
    assert {"docker", "fake", "scripted", "toolchain", "github-token"} <= working


def test_selecting_a_clashing_or_missing_name_says_why(tmp_path: Path) -> None:
    site = tmp_path / "site"
    code = HEADER + (
        "@hookimpl\ndef shadowclone_launchers():\n"
        "    return [LauncherRegistration(name='docker', summary='mine', factory=lambda: None)]\n"
    )
    fake_distribution(site, "docker-rival", "9.9", "rival", code)
    script = (
        "from shadowclone.plugin import load_registry\n"
        "r = load_registry()\n"
        "for name in ('docker', 'nope'):\n"
        "    try:\n        r.launcher(name)\n"
        "    except Exception as e:\n        print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
    )
    first, second = done.stdout.splitlines()
    assert "launcher 'docker' is failed" in first
    assert "shadowclone-docker-launch 0.1.0 and docker-rival 9.9" in first
    assert second.startswith("no launcher named 'nope'; installed: fake")


GUIDE = Path(__file__).parents[2] / "docs" / "plugins.md"


def test_the_guides_example_is_the_example_plugin_as_it_is() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    shown = dict(
        re.findall(
            r"^`([\w./]+)`[^\n]*\n(?:[^\n`][^\n]*\n)*\n```\w+\n(.*?)\n```", guide, re.M | re.S
        )
    )
    expected = {
        "pyproject.toml",
        "src/shadowclone_example/__init__.py",
        "tests/conftest.py",
        "tests/test_local_launcher.py",
        "tests/test_example_agent.py",
    }
    assert expected <= shown.keys()
    for name in expected:
        assert shown[name] + "\n" == (EXAMPLE / name).read_text(encoding="utf-8"), name


@pytest.mark.slow
def test_the_example_passes_the_shipped_suites_from_an_installed_kit(
    tmp_path: Path,
) -> None:
    """As a third party: shadowclone and shadowclone-testing from wheels, the example from its
    folder, its tests copied out of this checkout, nothing of the workspace on the path. Its
    launcher passes the launcher contract (11 tests) and one of its own, its engine the
    engine scenarios (16)."""
    bin_dir = make_venv(tmp_path / "venv")
    wheels = build_wheels(SOURCE, tmp_path / "wheels")
    core = [str(w) for w in wheels if re.match(r"shadowclone-\d", w.name)]
    tested = [str(w) for w in wheels if w.name.startswith("shadowclone_testing-")]
    assert core and tested, wheels
    uv_pip(
        bin_dir,
        *core,
        f"{tested[0]}[pytest]",
        f"{EXAMPLE}[test]",
        "--find-links",
        str(tmp_path / "wheels"),
    )
    shutil.copytree(EXAMPLE / "tests", tmp_path / "work" / "tests")
    env = user_env(tmp_path / "home")
    done = subprocess.run(
        [str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "28 passed" in done.stdout, done.stdout[-2000:]
    where = run(
        [
            str(bin_dir / "python"),
            "-c",
            "import shadowclone_testing; print(shadowclone_testing.__file__)",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert str(tmp_path / "venv") in where and str(SOURCE) not in where
