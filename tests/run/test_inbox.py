"""The clone's reader of delivered inbox lines and its wait for the stop marker."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import InboxKind, InboxLine, StopMarker
from shadowclone.run.inbox import delivered, set_on_stop, wait_for_stop

pytestmark = pytest.mark.anyio

BOUND_S = 10.0
"""A generous bound that turns a hang into a failure; no test depends on speed."""


def deliver(folder: RunFolder, line: InboxLine) -> None:
    """What serve does: append the inbox line to the deliveries file."""
    files.append_line(folder.deliveries_file, schemas.dumps(line))


def message(number: int) -> InboxLine:
    return InboxLine(id=f"m{number}", kind=InboxKind.MESSAGE, text=f"message {number}")


async def test_yields_lines_already_there_then_new_ones_in_order(sc_folder: RunFolder) -> None:
    deliver(sc_folder, message(1))
    # A slow poll: the second line can only arrive in time through the filesystem watcher.
    async with contextlib.aclosing(delivered(sc_folder, poll_s=60.0)) as lines:
        first = await asyncio.wait_for(anext(lines), BOUND_S)
        deliver(sc_folder, message(2))
        deliver(sc_folder, message(3))
        second = await asyncio.wait_for(anext(lines), BOUND_S)
        third = await asyncio.wait_for(anext(lines), BOUND_S)
    assert [first.id, second.id, third.id] == ["m1", "m2", "m3"]
    assert third.text == "message 3"


async def test_keeps_only_the_kinds_asked_for(sc_folder: RunFolder) -> None:
    answer = InboxLine(id="a1", kind=InboxKind.ANSWER, text="yes", question_id="q1")
    deliver(sc_folder, message(1))
    deliver(sc_folder, answer)
    deliver(sc_folder, message(2))
    async with contextlib.aclosing(delivered(sc_folder, {InboxKind.ANSWER}, poll_s=0.1)) as lines:
        got = await asyncio.wait_for(anext(lines), BOUND_S)
        assert got == answer
        deliver(sc_folder, message(3))
        deliver(sc_folder, InboxLine(id="a2", kind=InboxKind.ANSWER, text="no", question_id="q2"))
        got = await asyncio.wait_for(anext(lines), BOUND_S)
        assert got.id == "a2"


async def test_each_line_once_even_if_delivered_twice_and_skips_bad_lines(
    sc_folder: RunFolder,
) -> None:
    deliver(sc_folder, message(1))
    files.append_line(sc_folder.deliveries_file, b'{"not": "an inbox line"}')
    deliver(sc_folder, message(1))
    deliver(sc_folder, message(2))
    async with contextlib.aclosing(delivered(sc_folder, poll_s=0.1)) as lines:
        ids = [(await asyncio.wait_for(anext(lines), BOUND_S)).id for _ in range(2)]
        assert ids == ["m1", "m2"]
        deliver(sc_folder, message(3))
        assert (await asyncio.wait_for(anext(lines), BOUND_S)).id == "m3"


async def test_a_torn_line_waits_for_its_end(sc_folder: RunFolder) -> None:
    whole = schemas.dumps(message(1))
    sc_folder.deliveries_file.write_bytes(whole[:10])
    async with contextlib.aclosing(delivered(sc_folder, poll_s=0.1)) as lines:
        pending = asyncio.ensure_future(anext(lines))
        await asyncio.sleep(0.3)
        assert not pending.done()
        with open(sc_folder.deliveries_file, "ab") as handle:
            handle.write(whole[10:] + b"\n")
        assert (await asyncio.wait_for(pending, BOUND_S)).id == "m1"


async def test_the_poll_reads_on_when_the_folder_cannot_be_watched(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "not yet made")  # the watcher fails: only the poll is left
    async with contextlib.aclosing(delivered(folder, poll_s=0.1)) as lines:
        pending = asyncio.ensure_future(anext(lines))
        await asyncio.sleep(0.3)
        folder.path.mkdir()
        deliver(folder, message(1))
        assert (await asyncio.wait_for(pending, BOUND_S)).id == "m1"


async def test_closing_the_reader_ends_its_watcher(sc_folder: RunFolder) -> None:
    lines = delivered(sc_folder, poll_s=60.0)
    pending = asyncio.ensure_future(anext(lines))
    await asyncio.sleep(0.2)
    pending.cancel()
    await asyncio.wait_for(asyncio.wait({pending}), BOUND_S)
    await asyncio.wait_for(lines.aclose(), BOUND_S)
    watchers = [task for task in asyncio.all_tasks() if task.get_name().startswith("watch ")]
    assert watchers == []


async def test_wait_for_stop_returns_the_marker(sc_folder: RunFolder) -> None:
    waiting = asyncio.ensure_future(wait_for_stop(sc_folder, poll_s=60.0))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    sc_folder.write_stop(StopMarker(reason="enough"))
    marker = await asyncio.wait_for(waiting, BOUND_S)
    assert marker.reason == "enough"


async def test_set_on_stop_sets_the_event(sc_folder: RunFolder) -> None:
    stop = asyncio.Event()
    watcher = asyncio.ensure_future(set_on_stop(sc_folder, stop, poll_s=0.1))
    sc_folder.write_stop(StopMarker())
    await asyncio.wait_for(stop.wait(), BOUND_S)
    await asyncio.wait_for(watcher, BOUND_S)
