"""What a clone carries from one phase of its work to the next (R30).

A review of code the owner did not write runs in three launches: the first fetches it with
the network on and no engine running; the second runs the engine with nothing but the model's
API reachable; the third posts the review with the network on and no engine. Each phase writes
here what the next one needs; the file lives in the run folder, written only inside the clone.
"""

from __future__ import annotations

import attrs

from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.run.drive import EngineResult
from shadowclone.run.target import Plan


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


def write_carry(folder: RunFolder, carry: Carry) -> None:
    schemas.write(folder.carry_file, carry)


def read_carry(folder: RunFolder) -> Carry:
    return schemas.read(folder.carry_file, Carry)
