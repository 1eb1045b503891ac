"""What the Codex driver reads from disk before it starts a session: the repository's
`AGENTS.md` (never through a link, never more than Codex would) and, behind npm's `codex`
launcher, the native program it starts instead."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shadowclone_codex.instructions import MAX_BYTES, project_instructions
from shadowclone_codex.native import (
    MANAGER_VARIABLE,
    PACKAGE_ROOT_VARIABLE,
    Program,
    native_program,
)

LINUX = ("linux", "x86_64")


def test_agents_md_is_given_as_codex_gives_a_trusted_project_s(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Run the tests with make check.\n")
    assert project_instructions(tmp_path) == (
        f"# AGENTS.md instructions for {tmp_path}\n\n"
        "<INSTRUCTIONS>\nRun the tests with make check.\n\n</INSTRUCTIONS>"
    )


def test_the_override_file_comes_first(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("the usual\n")
    (tmp_path / "AGENTS.override.md").write_text("the override\n")
    text = project_instructions(tmp_path)
    assert text is not None and "the override" in text and "the usual" not in text


@pytest.mark.parametrize("content", [None, "", "  \n\n"])
def test_no_file_or_an_empty_one_gives_nothing(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "AGENTS.md").write_text(content)
    assert project_instructions(tmp_path) is None


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    """The repository may link AGENTS.md to the run program's secrets: nothing is read."""
    secret = tmp_path / "secrets.toml"
    secret.write_text('github_token = "ghp_never"\n')
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "AGENTS.md").symlink_to(secret)
    (workspace / "AGENTS.override.md").symlink_to("/proc/self/environ")
    assert project_instructions(workspace) is None


def test_a_fifo_or_a_folder_is_passed_over_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.override.md")
    (tmp_path / "AGENTS.md").mkdir()
    done = threading.Event()
    result: list[str | None] = []

    def read() -> None:
        result.append(project_instructions(tmp_path))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "reading AGENTS.md hung on a fifo"
    assert result == [None]


def test_a_long_file_is_cut_where_codex_cuts_it(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"a" * MAX_BYTES + b"THE-TAIL")
    text = project_instructions(tmp_path)
    assert text is not None and "a" * MAX_BYTES in text and "THE-TAIL" not in text


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=2048))
def test_any_bytes_read_as_text_without_failing(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "AGENTS.md").write_bytes(data)
        text = project_instructions(Path(folder))
    assert (text is None) == (not data.decode("utf-8", errors="replace").strip())


# --------------------------------------------------------------------------- the native program


def npm_layout(root: Path, where: str) -> tuple[Path, Path]:
    """npm's `codex` launcher and the platform binary, installed the way `where` says."""
    package = root / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    launcher = package / "bin" / "codex.js"
    launcher.write_text("#!/usr/bin/env node\n")
    launcher.chmod(0o755)
    vendor = {
        "nested": package / "node_modules" / "@openai" / "codex-linux-x64" / "vendor",
        "hoisted": root / "node_modules" / "@openai" / "codex-linux-x64" / "vendor",
        "bundled": package / "vendor",
    }[where]
    binary = vendor / "x86_64-unknown-linux-musl" / "bin" / "codex"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (root / "bin").mkdir()
    (root / "bin" / "codex").symlink_to(launcher)
    return root / "bin" / "codex", binary


@pytest.mark.parametrize("where", ["nested", "hoisted", "bundled"])
def test_the_native_binary_behind_npm_s_launcher_is_started(tmp_path: Path, where: str) -> None:
    found, binary = npm_layout(tmp_path, where)
    package = (tmp_path / "node_modules" / "@openai" / "codex").resolve()
    assert native_program(str(found), LINUX) == Program(
        str(binary.resolve()), {PACKAGE_ROOT_VARIABLE: str(package), MANAGER_VARIABLE: "1"}
    )


def test_anything_else_is_started_as_it_is(tmp_path: Path) -> None:
    found, binary = npm_layout(tmp_path, "nested")
    assert native_program(str(found), ("sunos", "sparc")) == Program(str(found))
    binary.chmod(0o644)  # not executable: the launcher would fail, so let it say so
    assert native_program(str(found), LINUX) == Program(str(found))
    script = tmp_path / "my-codex"
    script.write_text("#!/bin/sh\n")
    assert native_program(str(script), LINUX) == Program(str(script))


def test_the_installed_codex_resolves_to_a_native_binary(sc_engines_on_path: Path) -> None:
    """The layout the tests and the clone image install (npm, Linux) is the one handled."""
    import shutil

    found = shutil.which("codex")
    assert found is not None
    program = native_program(found)
    assert program.path != found and Path(program.path).name == "codex", program
    assert program.env[MANAGER_VARIABLE] == "1"
