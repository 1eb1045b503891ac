"""The core's layers (docs/architecture.md) are import-linter contracts in pyproject.toml, run by
`make lint`. These tests prove the contracts hold and that they would catch a module breaking
them: each plants one forbidden import in a copy of the core and expects the check to fail."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "src" / "shadowclone"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PLUGIN_SOURCES = [ROOT / "plugins" / name / "src" for name in ("claude", "codex", "docker_launch")]


def lint_imports(cwd: Path, python_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)  # the copy comes before the installed core
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_core_keeps_its_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        ("files.py", "import shadowclone.cli.app", "layers"),
        ("config/durations.py", "import shadowclone.node.runfolder", "layers"),
        ("node/runfolder.py", "import shadowclone.serve", "layers"),
        ("plugin/spec.py", "import shadowclone.run.progress", "layers"),
        ("serve/records.py", "import shadowclone.run.progress", "Host code does not import"),
        ("dashboard/hosts.py", "import shadowclone.proxy.secrets", "Host code does not import"),
        ("run/progress.py", "import shadowclone.serve.records", "does not import host code"),
        ("proxy/secrets.py", "import shadowclone.node.local", "does not import host code"),
        ("cli/app.py", "import shadowclone_testing.demo", "do not import the testing kit"),
    ],
)
def test_a_planted_import_against_the_layers_fails_the_check(
    tmp_path: Path, module: str, planted: str, broken: str
) -> None:
    copy = tmp_path / "src" / "shadowclone"
    shutil.copytree(CORE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}\n", encoding="utf-8")
    result = lint_imports(tmp_path, python_path=tmp_path / "src")
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout
    assert broken in result.stdout.split("Broken contracts", 1)[1]
    assert planted.rsplit(maxsplit=1)[-1] in result.stdout


def test_plugins_reach_the_core_only_through_its_plugin_api() -> None:
    """The contract forbids each core package but cannot forbid the root one without its
    `plugin` child, so the root's own names (`from shadowclone import __version__`) are
    checked here."""
    strays: list[str] = []
    for source in PLUGIN_SOURCES:
        for path in source.rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "shadowclone":
                    names = [f"shadowclone.{alias.name}" for alias in node.names]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                strays += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                    for name in names
                    if name == "shadowclone"
                    or (name.startswith("shadowclone.") and name.split(".")[1] != "plugin")
                ]
    assert strays == []
