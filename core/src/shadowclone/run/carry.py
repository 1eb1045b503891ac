"""What a clone carries from one phase of its work to the next.

A review of code the owner did not write runs in three launches: the first fetches it with
the network on and no engine running; the second runs the engine with nothing but the model's
API reachable; the third posts the review with the network on and no engine. Each phase writes
here what the next one needs; the file lives in the run folder, written only inside the clone.

A clone whose login's usage limit resets a long wait away ends its process too, and carries
its engine's working session (`KeptSession`) to the launch that resumes it at the reset.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs

from shadowclone.files import write_atomic
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.run.drive import EngineResult
from shadowclone.run.github import ReviewThread
from shadowclone.run.plan import Plan
from shadowclone.run.review.findings import Finding


@attrs.frozen
class ReviewLine:
    stage: str
    passed: bool
    summary: str


STATE_DIR_NAME = re.compile(r"state-[A-Za-z0-9_]{1,64}")
"""A state folder's name in the engine's corner (`tempfile.mkdtemp`'s, prefixed)."""


def _session_id(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not schemas.SESSION_ID.fullmatch(value):
        raise ValueError(f"{attribute.name} is not a session id: {value[:80]!r}")


def _state_dir_name(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not STATE_DIR_NAME.fullmatch(value):
        raise ValueError(f"{attribute.name} is not a state folder's name: {value[:80]!r}")


@attrs.frozen
class KeptSession:
    """The engine's working session, ended for a long usage limit: what the launch that
    resumes it needs besides the workspace."""

    session_id: str = attrs.field(validator=_session_id)
    state_dir: str = attrs.field(validator=_state_dir_name)
    """The session's state folder, by name, in the engine's corner of the run folder."""
    taken: tuple[str, ...] = ()
    """The messages the clone's sessions took so far: never given again."""
    turns: int = 0
    minutes: float = 0.0
    cost_usd: float = 0.0
    """The caps' usage so far."""
    fixes: int = 0
    """Fix rounds used."""


@attrs.frozen
class Carry:
    plan: Plan
    base_ref: str
    result: EngineResult | None = None
    reviews: tuple[ReviewLine, ...] = ()
    findings: tuple[Finding, ...] = ()
    """A review's findings, reported by the engine, posted with the review."""
    conversation: str = ""
    """The issue's or pull request's conversation as the engine reads it (run/context.py),
    gathered while the network is on."""
    session: KeptSession | None = None
    """The working session a long usage limit ended, for the launch that resumes it."""
    open_threads: tuple[ReviewThread, ...] = ()
    """A continued pull request's open review threads, answered after the push."""


def write_carry(folder: RunFolder, carry: Carry, redact: Callable[[str], str]) -> None:
    """Every string passes `redact` first: the file stays in the run folder, on the host."""
    data = _redacted(schemas.CONVERTER.unstructure(carry), redact)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    write_atomic(folder.carry_file, text.encode() + b"\n", plain_folder=True)


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item, redact) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item, redact) for item in value]
    return value


def read_carry(folder: RunFolder) -> Carry:
    return schemas.read(folder.carry_file, Carry)
