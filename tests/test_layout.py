"""The repository's layout keeps its promises: tests and benchmarks share code through the
testing kit (shadowclone_testing) and fixtures only, never by importing one another; no module
grows past `MAX_MODULE_LINES` lines, and no class that does things (as opposed to a record of
fields) past `MAX_CLASS_LINES` lines or `MAX_CLASS_ATTRIBUTES` attributes."""

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


MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 260
MAX_CLASS_ATTRIBUTES = 12


def all_python_files() -> Iterator[Path]:
    for folder in (ROOT / "core", ROOT / "plugins", ROOT / "tests", ROOT / "bench"):
        yield from sorted(path for path in folder.rglob("*.py") if "/." not in str(path))


def test_no_module_is_over_the_size_it_may_have() -> None:
    large = {
        str(path.relative_to(ROOT)): count
        for path in all_python_files()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert large == {}


def span(node: ast.stmt) -> int:
    return (node.end_lineno or node.lineno) - node.lineno


def is_record(node: ast.ClassDef) -> bool:
    """A class of fields (attrs, a TypedDict, an enum...): no method but dunders and short
    helpers, a few lines in all."""
    methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    short = all(m.name.startswith("__") or span(m) < 12 for m in methods)
    return short and sum(span(m) for m in methods) < 40


def assigned_attributes(node: ast.ClassDef) -> set[str]:
    found = set()
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "self"
            and isinstance(inner.ctx, ast.Store)
        ):
            found.add(inner.attr)
    return found


def test_no_class_is_over_the_size_it_may_have() -> None:
    large = []
    for path in all_python_files():
        if "/tests/" in f"/{path.relative_to(ROOT)}":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or is_record(node):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            attributes = len(assigned_attributes(node))
            if lines > MAX_CLASS_LINES or attributes > MAX_CLASS_ATTRIBUTES:
                large.append(f"{path.relative_to(ROOT)}: {node.name} ({lines} lines, {attributes})")
    assert large == []
