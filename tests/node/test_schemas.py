"""Every run-folder schema survives a write and a read unchanged; bad files are named."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone import files
from shadowclone.errors import MalformedFile
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    InboxLine,
    ProgressKind,
    ProgressLine,
    Record,
    Request,
    SetupRecord,
    Step,
    StopMarker,
)
from shadowclone.node.target import Target

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
st.register_type_strategy(datetime, times)
st.register_type_strategy(float, st.floats(allow_nan=False, allow_infinity=False))
st.register_type_strategy(
    Target,
    st.builds(
        Target,
        owner=st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
        repo=st.from_regex(r"[a-z][a-z0-9._-]{0,10}", fullmatch=True),
        number=st.integers(1, 10**6),
        kind=st.sampled_from([None, "issue", "pull"]),
    ),
)

SCHEMAS = [Request, Record, InboxLine, ProgressLine, StopMarker, SetupRecord]
for _kind in (*SCHEMAS, Target, schemas.Question, schemas.Answer, schemas.Usage):
    attrs.resolve_types(_kind)
for _kind in SCHEMAS:  # files this version writes carry this version
    st.register_type_strategy(_kind, st.builds(_kind, v=st.just(schemas.SCHEMA_VERSION)))


@pytest.mark.parametrize("kind", SCHEMAS, ids=lambda k: k.__name__)
def test_every_schema_round_trips(kind: type[object], tmp_path: Path) -> None:
    @settings(max_examples=60, deadline=None)
    @given(value=st.from_type(kind))
    def round_trip(value: object) -> None:
        path = tmp_path / "file.json"
        schemas.write(path, value)
        assert schemas.read(path, kind) == value
        assert schemas.loads(schemas.dumps(value), kind, path) == value

    round_trip()


@given(st.from_type(Target))
def test_targets_parse_back_from_their_key(target: Target) -> None:
    parsed = Target.parse(target.key)
    assert (parsed.owner, parsed.repo, parsed.number) == (target.owner, target.repo, target.number)


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b"{", "not valid JSON"),
        (b"[]", "expected a JSON object for a Request"),
        (b'{"v": 99}', "schema version 99 is newer than this shadowclone reads"),
        (b'{"id": "x"}', "not a valid Request"),
    ],
)
def test_a_malformed_file_is_named(tmp_path: Path, content: bytes, detail: str) -> None:
    path = tmp_path / "request.json"
    path.write_bytes(content)
    with pytest.raises(MalformedFile) as error:
        schemas.read(path, Request)
    assert str(error.value).startswith(str(path))
    assert detail in str(error.value)


def test_progress_lines_skip_bad_and_torn_lines(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    good = ProgressLine(Step.ENGINE, ProgressKind.TEXT, "hello")
    folder.append_progress(good)
    with open(folder.progress_file, "ab") as handle:
        handle.write(b'{"step": "engine", "kind": "nonsense"}\n{"step": "eng')  # torn by a crash
    lines, problems, end = folder.progress()
    assert lines == [good] and len(problems) == 1 and str(folder.progress_file) in problems[0]
    folder.append_progress(good)  # the next writer ends the torn line first
    lines, problems, _ = folder.progress()
    assert lines == [good, good] and len(problems) == 2
    more, _, _ = folder.progress(end)
    assert more == [good]


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "x" / "record.json"
    files.write_atomic(target, b"one")
    files.write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


def test_append_refuses_a_line_with_a_newline(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="newline"):
        files.append_line(tmp_path / "inbox.jsonl", b"a\nb")


def test_stop_marker_presence_counts_even_if_unreadable(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.stop_marker() is None
    folder.stop_file.write_text("garbage")
    assert isinstance(folder.stop_marker(), StopMarker)
