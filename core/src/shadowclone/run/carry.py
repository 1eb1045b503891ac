"""What a clone carries from one phase of its work to the next.

A review of code the owner did not write runs in three launches: the first fetches it with
the network on and no engine running; the second runs the engine with nothing but the model's
API reachable; the third posts the review with the network on and no engine. Each phase writes
here what the next one needs; the file lives in the run folder, written only inside the clone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from shadowclone.files import write_atomic
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.run.drive import EngineResult
from shadowclone.run.plan import Plan
from shadowclone.run.review.findings import Finding


@attrs.frozen
class ReviewLine:
    stage: str
    passed: bool
    summary: str


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
