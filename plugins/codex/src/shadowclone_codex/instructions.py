"""The repository's own instructions for Codex: its `AGENTS.md`.

The clone marks its workspace untrusted, so that Codex never loads the repository's `.codex/`
layer (MCP servers and hooks that would run its code as the session opens). Since Codex 0.150
an untrusted project gives no `AGENTS.md` either, which an owner's repository writes for
exactly this reader. The driver hands it over itself, in the form Codex gives a trusted
project's: a user message before the first prompt. Claude Code reads its `CLAUDE.md` itself.

The driver runs in the run program, which can read the secrets; the workspace is the
repository's to shape, so the file is read only if it is a regular file in the workspace's
top folder, never through a link.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

FILES = ("AGENTS.override.md", "AGENTS.md")
"""Looked for in this order, as Codex does; the first that is there is used."""
MAX_BYTES = 32 * 1024
"""Codex's own limit (`project_doc_max_bytes`): the rest of a longer file is left out."""


def _read(path: Path) -> str | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return None  # a folder, or a fifo or a device that would hang or never end
            data = os.read(descriptor, MAX_BYTES)
        finally:
            os.close(descriptor)
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EACCES):
            log.warning("could not read %s: %s", path, error)
        return None  # absent, a link, not ours to read: the session goes on without it
    return data.decode("utf-8", errors="replace")


def project_instructions(workspace: Path) -> str | None:
    """The text of the workspace's `AGENTS.md` as Codex shows a trusted project's, or None."""
    for name in FILES:
        text = _read(workspace / name)
        if text is not None and text.strip():
            return (
                f"# AGENTS.md instructions for {workspace}\n\n"
                f"<INSTRUCTIONS>\n{text}\n</INSTRUCTIONS>"
            )
    return None
