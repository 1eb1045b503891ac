"""The native Codex program behind npm's `codex` launcher.

`npm install @openai/codex` puts a Node script on the PATH (`bin/codex.js`) that finds the
native binary of this platform in an optional dependency (`@openai/codex-linux-x64`...) and runs
it with two variables of provenance. On Node older than 23 it stays as the binary's parent:
Node's start and the extra process cost about 0.1 s before every session (measured in the clone
image, Node 18) and tens of MiB while it runs. The driver starts the binary itself, the same
way, wherever the package's layout is the one the launcher knows; anything else (another
installer, a wrapper script) is started as it is.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

LAUNCHER_NAME = "codex.js"
PACKAGE_ROOT_VARIABLE = "CODEX_MANAGED_PACKAGE_ROOT"
MANAGER_VARIABLE = "CODEX_MANAGED_BY_NPM"

TARGETS: Mapping[tuple[str, str], tuple[str, str]] = {
    ("linux", "x86_64"): ("x86_64-unknown-linux-musl", "codex-linux-x64"),
    ("linux", "aarch64"): ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
    ("darwin", "x86_64"): ("x86_64-apple-darwin", "codex-darwin-x64"),
    ("darwin", "arm64"): ("aarch64-apple-darwin", "codex-darwin-arm64"),
}
"""(sys.platform, machine) -> (the target triple, the platform package under `@openai/`), as
the launcher maps them."""


@attrs.frozen
class Program:
    """What to start for `codex`: the program and the variables it needs beside the task's."""

    path: str
    env: Mapping[str, str] = attrs.field(factory=dict)


def native_program(found: str, machine: tuple[str, str] | None = None) -> Program:
    """The native binary for the `codex` found on the PATH, with the launcher's variables, or
    `found` itself when it is not npm's launcher or its binary is not where the launcher
    looks."""
    launcher = Path(found).resolve()
    if launcher.name != LAUNCHER_NAME or launcher.parent.name != "bin":
        return Program(found)
    target = TARGETS.get(machine or (sys.platform, platform.machine()))
    if target is None:
        return Program(found)
    triple, package = target
    root = launcher.parent.parent  # .../@openai/codex
    for vendor in (
        root / "node_modules" / "@openai" / package / "vendor",  # nested by npm
        root.parent / package / "vendor",  # hoisted beside it
        root / "vendor",  # in the package itself (older releases)
    ):
        binary = vendor / triple / "bin" / "codex"
        if binary.is_file() and os.access(binary, os.X_OK):
            return Program(str(binary), {PACKAGE_ROOT_VARIABLE: str(root), MANAGER_VARIABLE: "1"})
    return Program(found)
