"""What a clone carries to its next launch: a kept session reads back as written, and a carry
file naming anything but a session id and a state folder in the engine's corner is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shadowclone.errors import MalformedFile
from shadowclone.node.runfolder import RunFolder
from shadowclone.run.carry import Carry, KeptSession, read_carry, write_carry
from shadowclone.run.github.models import Issue, Repository, User
from shadowclone.run.plan import Mode, Plan


def plan() -> Plan:
    """An issue of the owner's, as the target step resolves it."""
    repo = Repository("owner/app", False, "public", "main", "write", "http://x/owner/app.git")
    issue = Issue("owner/app", 1, "Work", "", "owner", "open", "http://x/owner/app/issues/1", False)
    return Plan(Mode.ISSUE, repo, issue, User("owner", "The Owner", None), None, "shadowclone/1-w")


def kept(**changes: object) -> KeptSession:
    fields: dict[str, object] = {
        "session_id": "0b7c3d9e-1111-4222-8333-444455556666",
        "state_dir": "state-a1b2_c3",
        "taken": ("m1", "m2"),
        "turns": 3,
        "minutes": 4.5,
        "cost_usd": 0.25,
        "fixes": 1,
    }
    fields.update(changes)
    return KeptSession(**fields)  # type: ignore[arg-type]


def test_a_kept_session_reads_back_as_written(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    carry = Carry(plan(), "abc123", conversation="the issue", session=kept())
    write_carry(folder, carry, lambda text: text)
    assert read_carry(folder) == carry


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("state_dir", "../../elsewhere"),
        ("state_dir", "state-x/../../y"),
        ("state_dir", "/tmp/state-x"),
        ("session_id", "--dangerously-skip-permissions"),
        ("session_id", ""),
    ],
)
def test_a_carry_naming_another_place_or_an_option_is_refused(
    tmp_path: Path, field: str, value: str
) -> None:
    folder = RunFolder(tmp_path)
    write_carry(folder, Carry(plan(), "abc123", session=kept()), lambda text: text)
    data = json.loads(folder.carry_file.read_text())
    data["session"][field] = value
    folder.carry_file.write_text(json.dumps(data))
    with pytest.raises(MalformedFile):
        read_carry(folder)
