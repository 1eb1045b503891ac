"""The secrets file on the host: created as an empty template, checked by its mode and
owner, never opened for reading. Only clones read it, through a read-only mount."""

from __future__ import annotations

import os
import stat
import textwrap
from collections.abc import Iterable
from pathlib import Path

from shadowclone.plugin.types import SecretProviderRegistration

HEADER = """\
# shadowclone secrets. Paste each login or token you use between the quotes; leave the others
# empty. Keep this file private (mode 0600). shadowclone never reads it on this machine: only
# your clones do, inside their containers, where it is mounted read-only.
"""


WIDTH = 96
"""The template's comments are wrapped at this width."""


def template(providers: Iterable[SecretProviderRegistration]) -> str:
    blocks = [HEADER]
    for provider in sorted(providers, key=lambda p: (p.engine is not None, p.name)):
        for secret in provider.secrets:
            quotes = "''''''" if secret.file else '""'
            said = textwrap.fill(
                f"{secret.description} (login {provider.name})",
                width=WIDTH,
                initial_indent="# ",
                subsequent_indent="# ",
                break_on_hyphens=False,
            )
            blocks.append(f"\n{said}\n{secret.key} = {quotes}\n")
    return "".join(blocks)


def create_template(path: Path, providers: Iterable[SecretProviderRegistration]) -> bool:
    """Write the template if there is no file yet (mode 0600 from the start); False if one
    exists. Opens for writing only, never for reading."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(template(providers))
    return True


def privacy_problems(path: Path) -> list[str]:
    """Why the file is not private to its owner, from its metadata alone."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return [f"{path} does not exist"]
    problems = []
    if not stat.S_ISREG(info.st_mode):
        problems.append(f"{path} is not a regular file")
    if info.st_mode & 0o077:
        problems.append(
            f"{path} has mode {stat.S_IMODE(info.st_mode):04o}; others can read it: "
            f"run `chmod 600 {path}`"
        )
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        problems.append(f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})")
    return problems
