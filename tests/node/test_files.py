"""Reading the end of a huge lines file: where its last whole lines begin."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone import files
from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, ProgressLine, Step, dumps
from shadowclone.plugin import Outcome
from shadowclone_testing.harness import CliResult, set_up


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    torn=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    limit=st.integers(1, 200),
)
def test_the_tail_begins_at_the_first_whole_line_inside_the_limit(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], torn: bytes, limit: int
) -> None:
    data = b"".join(line + b"\n" for line in lines) + torn
    path = tmp_path_factory.mktemp("tail") / "lines"
    path.write_bytes(data)
    offset = files.tail_offset(path, limit)
    if len(data) <= limit:
        assert offset == 0
        return
    first = len(data) - limit
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    assert offset == min([s for s in starts if s >= first], default=len(data))


def test_get_on_a_progress_file_beyond_one_read_shows_its_latest_lines(
    sc_home: Paths, sc_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The latest state, not the first lines: `get` reads a huge log from its end, and says in
    one line that it skipped the beginning."""
    set_up(sc_home)
    started = sc_cli("start", "acme/app#1", "--json")
    clone_id = json.loads(started.out)["id"]
    folder = RunFolder(sc_home.clones_dir / clone_id)
    with folder.progress_file.open("w", encoding="utf-8") as handle:
        for number in range(2000):
            line = ProgressLine(Step.ENGINE, ProgressKind.TEXT, f"line {number}")
            handle.write(dumps(line).decode() + "\n")
        final = ProgressLine(Step.FINISH, ProgressKind.FINAL, "the end", outcome=Outcome.DONE)
        handle.write(dumps(final).decode() + "\n")
    monkeypatch.setattr(files, "MAX_READ_BYTES", 20_000)  # a "huge" file, cheaply

    shown = sc_cli("get", clone_id, "-n", "3")
    assert shown.code == 0, shown.err
    assert "line 1998" in shown.out and "line 1999" in shown.out and "finished: done" in shown.out
    assert "line 0\n" not in shown.out
    [warning] = [row for row in shown.out.splitlines() if row.startswith("warning:")]
    assert "bytes were skipped" in warning and str(Path(folder.progress_file)) in warning
    followed = sc_cli("get", clone_id, "--follow", "-n", "2")  # the final line ends it at once
    assert "line 1999" in followed.out and "line 0\n" not in followed.out
