"""The repository's layout keeps its promises: tests and benchmarks share code through the
testing kit (shadowclone_testing) and fixtures only, never by importing one another."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_FOLDERS = (ROOT / "tests", ROOT / "bench", *sorted((ROOT / "plugins").glob("*/tests")))


def python_files() -> Iterator[Path]:
    for folder in TEST_FOLDERS:
        yield from sorted(folder.rglob("*.py"))


def imported(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, "." * node.level + (node.module or "")


def is_test_module(name: str, local: set[str]) -> bool:
    first = name.split(".", maxsplit=1)[0]
    return name.startswith(".") or first in {"tests", "conftest", "bench"} or first in local


def test_no_test_or_benchmark_imports_another() -> None:
    local = {path.stem for path in python_files()}
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in python_files()
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8")))
        if is_test_module(name, local)
    ]
    assert len(local) > 50, "the walk found the test modules"
    assert found == []


def test_the_check_sees_each_kind_of_import() -> None:
    local = {"test_a", "helpers"}
    for source in (
        "from tests.conftest import x",
        "import tests.serve.conftest",
        "from . import helpers",
        "from .helpers import y",
        "import conftest",
        "from test_a import z",
        "import helpers",
    ):
        [(_, name)] = imported(ast.parse(source))
        assert is_test_module(name, local), source
    [(_, kit)] = imported(ast.parse("from shadowclone_testing.harness import set_up"))
    assert not is_test_module(kit, local)
