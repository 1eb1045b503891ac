"""Run folders sent over the network: serve's relay (a real HTTP server on loopback) and a
clone's relay keep two copies of a run folder, each file one way, by byte offset for lines.
Whatever is resent, lost or reordered, and whichever side restarts, serve's copy of what the
clone wrote is always a prefix of the clone's, and ends equal to it."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import attrs
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shadowclone.errors import MalformedFile
from shadowclone.node import sending
from shadowclone.node.checks import ENVIRONMENT_FOLDER
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin.types import Launcher, RelayAccess
from shadowclone.relay.server import Gap, RelayFiles, RelayThread, relay_for_checks
from shadowclone.run.relay import Relay, RelayError, RelayLink
from shadowclone_testing.web import free_port

CLONE = "261206-120000-abcd"
OTHER = "261206-120001-wxyz"
REQUEST = b'{"id": "261206-120000-abcd"}\n'


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """serve's clones folder, with the run folders of two clones."""
    clones = tmp_path / "host"
    for clone_id in (CLONE, OTHER):
        (clones / clone_id).mkdir(parents=True)
        (clones / clone_id / "request.json").write_bytes(REQUEST)
    return clones


@pytest.fixture
def served(host: Path) -> Iterator[str]:
    relay = RelayThread(host, "127.0.0.1")
    port = relay.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        relay.stop()


def relay_for(url: str, host: Path, clone: Path, clone_id: str = CLONE) -> Relay:
    key = sending.load_key(host)
    return Relay(RelayLink(url, clone_id, sending.credential(key, clone_id)), clone)


async def begun(relay: Relay) -> None:
    """A launch's first pull (`Relay.begin`), then the relay closed."""
    try:
        await relay.begin()
    finally:
        await relay.aclose()


def synced(relay: Relay, rounds: int = 1) -> None:
    async def go() -> None:
        try:
            for _ in range(rounds):
                await relay.sync()
        finally:
            await relay.aclose()

    asyncio.run(go())


def test_each_file_travels_its_way(host: Path, served: str, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    folder = host / CLONE
    (folder / "inbox.jsonl").write_bytes(b'{"id": "m1"}\n')
    (folder / "deliveries.jsonl").write_bytes(b'{"id": "m1"}\n{"torn": ')
    (folder / "stop.json").write_bytes(b"{}\n")
    (clone / "progress.jsonl").write_bytes(b'{"n": 1}\n{"n": 2}\n{"half')
    (clone / "handoff.json").write_bytes(b'{"network": "open"}\n')
    synced(relay_for(served, host, clone))
    assert (clone / "request.json").read_bytes() == REQUEST
    assert (clone / "inbox.jsonl").read_bytes() == b'{"id": "m1"}\n'
    assert (clone / "deliveries.jsonl").read_bytes() == b'{"id": "m1"}\n', "whole lines only"
    assert (clone / "stop.json").read_bytes() == b"{}\n"
    assert (folder / "progress.jsonl").read_bytes() == b'{"n": 1}\n{"n": 2}\n'
    assert (folder / "handoff.json").read_bytes() == b'{"network": "open"}\n'
    assert not (clone / "resume.json").exists() and not (folder / "carry.json").exists()
    # what neither side sends stays where it is
    assert not (folder / "record.json").exists() and not (clone / "record.json").exists()


def test_changes_and_removals_follow_and_nothing_is_sent_twice(
    host: Path, served: str, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    folder = host / CLONE
    (folder / "stop.json").write_bytes(b"{}\n")
    (clone / "handoff.json").write_bytes(b"{}\n")

    async def go() -> None:
        relay = relay_for(served, host, clone)
        try:
            await relay.sync()
            with (clone / "progress.jsonl").open("ab") as progress:
                progress.write(b'{"n": 1}\n')
            (clone / "handoff.json").unlink()
            (folder / "stop.json").unlink()
            with (folder / "inbox.jsonl").open("ab") as inbox:
                inbox.write(b'{"id": "m2"}\n')
            await relay.sync()
            await relay.sync()
            with (clone / "progress.jsonl").open("ab") as progress:
                progress.write(b'{"n": 2}\n')
            await relay.sync()
        finally:
            await relay.aclose()

    asyncio.run(go())
    assert (folder / "progress.jsonl").read_bytes() == b'{"n": 1}\n{"n": 2}\n'
    assert not (folder / "handoff.json").exists() and not (clone / "stop.json").exists()
    assert (clone / "inbox.jsonl").read_bytes() == b'{"id": "m2"}\n'


def test_a_round_asks_only_for_what_changed(host: Path, served: str, tmp_path: Path) -> None:
    """While nothing changes a round is one request, however many files there are; a change
    costs one more, for that file only, and arrives."""
    clone = tmp_path / "clone"
    clone.mkdir()
    folder = host / CLONE
    (folder / "inbox.jsonl").write_bytes(b'{"id": "m1"}\n')
    (folder / "deliveries.jsonl").write_bytes(b'{"id": "m1"}\n')
    (folder / "stop.json").write_bytes(b"{}\n")
    (folder / "session-given").mkdir()
    (folder / "session-given" / "a.txt").write_text("a\n")
    (clone / "progress.jsonl").write_bytes(b'{"n": 1}\n')
    (clone / "handoff.json").write_bytes(b"{}\n")
    asked: list[str] = []

    async def count(request: httpx2.Request) -> None:
        asked.append(f"{request.method} {request.url.path}")

    async def go() -> None:
        relay = relay_for(served, host, clone)
        relay._client.event_hooks["request"].append(count)  # what the relay asks serve
        try:
            await relay.sync()
            await relay.sync()  # the first round's sends confirmed
            asked.clear()
            for _ in range(5):
                await relay.sync()
            assert asked == [f"GET {sending.held_path(CLONE)}"] * 5
            asked.clear()
            (folder / "resume.json").write_bytes(b'{"at": 1}\n')
            with (folder / "inbox.jsonl").open("ab") as inbox:
                inbox.write(b'{"id": "m2"}\n')
            await relay.sync()
            assert sorted(asked) == sorted(
                [
                    f"GET {sending.held_path(CLONE)}",
                    f"GET {sending.path_of(CLONE, 'inbox.jsonl')}",
                    f"GET {sending.path_of(CLONE, 'resume.json')}",
                ]
            )
        finally:
            await relay.aclose()

    asyncio.run(go())
    assert (clone / "resume.json").read_bytes() == b'{"at": 1}\n'
    assert (clone / "inbox.jsonl").read_bytes() == b'{"id": "m1"}\n{"id": "m2"}\n'
    assert (clone / "session-given" / "a.txt").read_text() == "a\n"


def test_only_the_clones_own_credential_opens_its_folder(host: Path, served: str) -> None:
    key = sending.load_key(host)
    good = {"authorization": f"Bearer {sending.credential(key, CLONE)}"}
    with httpx2.Client(base_url=served, trust_env=False) as client:
        path = sending.path_of(CLONE, "request.json")
        assert client.get(path, headers=good).content == REQUEST
        others = sending.credential(key, OTHER)
        for headers in ({}, {"authorization": f"Bearer {others}"}, {"authorization": "Bearer x"}):
            assert client.get(path, headers=headers).status_code == 401
        assert client.get(sending.path_of(CLONE, "record.json"), headers=good).status_code == 404
        for sneaky in (
            f"/v1/clones/{CLONE}/..%2Frelay.key",
            f"/v1/clones/..%2F{CLONE}/request.json",
        ):
            for clone_id in (CLONE, f"../{CLONE}"):
                mine = {"authorization": f"Bearer {sending.credential(key, clone_id)}"}
                assert client.get(sneaky, headers=mine).status_code in (401, 404), sneaky
        assert client.put(path, headers=good, content=b"{}").status_code == 405, "down only"
        progress = sending.path_of(CLONE, "progress.jsonl")
        assert client.delete(progress, headers=good).status_code == 405, "appended only"
        bad = client.put(progress, params={"offset": "-1"}, headers=good, content=b"")
        assert bad.status_code == 400 and "offset" in bad.text
    assert stat.S_IMODE(os.stat(host / sending.KEY_FILE).st_mode) == 0o600


def test_a_removed_clone_takes_nothing_more(host: Path, served: str, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "progress.jsonl").write_bytes(b"{}\n")
    (host / CLONE).rename(host / f".removed-{CLONE}")
    with pytest.raises(RelayError, match="401"):
        synced(relay_for(served, host, clone))
    assert not (host / CLONE).exists()


def test_either_side_restarting_loses_nothing_and_repeats_nothing(
    host: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    lines = [f'{{"n": {n}}}\n'.encode() for n in range(6)]
    progress = clone / "progress.jsonl"
    for round_ in range(3):  # a new serve each round (same key), a new relay each round
        relay = RelayThread(host, "127.0.0.1")
        url = f"http://127.0.0.1:{relay.start()}"
        try:
            with progress.open("ab") as out:
                out.write(b"".join(lines[round_ * 2 : round_ * 2 + 2]))
            synced(relay_for(url, host, clone), rounds=2)
        finally:
            relay.stop()
    assert (host / CLONE / "progress.jsonl").read_bytes() == b"".join(lines)


def test_a_torn_line_left_by_a_serve_killed_mid_append_is_completed(
    host: Path, served: str, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    whole = b'{"n": 1}\n{"n": 2, "text": "long"}\n'
    (clone / "progress.jsonl").write_bytes(whole)
    (host / CLONE / "progress.jsonl").write_bytes(whole[:15])  # the first line and a part
    synced(relay_for(served, host, clone))
    assert (host / CLONE / "progress.jsonl").read_bytes() == whole


def test_a_copy_that_differs_from_the_clones_is_never_overwritten(
    host: Path, served: str, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    held = b'{"x": 9}\n{"x": 10}\n'
    (host / CLONE / "progress.jsonl").write_bytes(held)
    for mine, said in ((b'{"n": 1}\n', "more than this"), (held[:8] + b"8" + held[9:], "differs")):
        (clone / "progress.jsonl").write_bytes(mine)
        with pytest.raises(RelayError, match=said):
            synced(relay_for(served, host, clone))
        assert (host / CLONE / "progress.jsonl").read_bytes() == held


def test_more_than_one_request_holds_goes_in_several_even_a_line(
    host: Path, served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sending, "MAX_BODY_BYTES", 64)
    clone = tmp_path / "clone"
    clone.mkdir()
    lines = b"".join(f'{{"n": {n}, "pad": "{"x" * 20}"}}\n'.encode() for n in range(20))
    lines += b'{"long": "' + b"y" * 150 + b'"}\n{"after": 1}\n'  # one longer than a request
    (clone / "progress.jsonl").write_bytes(lines)
    (host / CLONE / "deliveries.jsonl").write_bytes(lines)
    synced(relay_for(served, host, clone))
    assert (host / CLONE / "progress.jsonl").read_bytes() == lines
    assert (clone / "deliveries.jsonl").read_bytes() == lines


def test_the_relay_runs_until_stopped_then_syncs_once_more(
    host: Path, served: str, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()

    async def go() -> None:
        relay = relay_for(served, host, clone)
        stop = asyncio.Event()
        running = asyncio.create_task(relay.run(stop, interval_s=0.05))
        try:
            (clone / "progress.jsonl").write_bytes(b'{"n": 1}\n')
            for _ in range(200):
                if (host / CLONE / "progress.jsonl").exists():
                    break
                await asyncio.sleep(0.02)
            with (clone / "progress.jsonl").open("ab") as out:
                out.write(b'{"final": true}\n')
            stop.set()
            await running
        finally:
            await relay.aclose()

    asyncio.run(go())
    assert (host / CLONE / "progress.jsonl").read_bytes() == b'{"n": 1}\n{"final": true}\n'


LINES = st.lists(
    st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"") + b"\n"), min_size=1, max_size=12
)


@settings(max_examples=150, deadline=None)
@given(LINES, st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), max_size=30))
def test_the_copy_is_a_prefix_of_the_clones_whatever_arrives(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    sends: list[tuple[int, int]],
) -> None:
    """Any byte ranges of the clone's file, sent in any order, any number of times: each is
    taken, partly taken or refused, and the copy stays a prefix of the clone's file; a send
    from the copy's size then completes it."""
    root = tmp_path_factory.mktemp("relay")
    (root / CLONE).mkdir()
    (root / CLONE / "request.json").write_bytes(REQUEST)
    relay = RelayFiles(root)
    whole = b"".join(lines)
    path = root / CLONE / "progress.jsonl"
    for asked, length in sends:
        start = min(asked, len(whole))
        try:
            relay.append(path, start, whole[start : start + length])
        except Gap as gap:
            assert gap.size == (path.stat().st_size if path.exists() else 0)
        held = path.read_bytes() if path.exists() else b""
        assert whole.startswith(held)
    size = path.stat().st_size if path.exists() else 0
    assert relay.append(path, size, whole[size:]) == len(whole)
    assert path.read_bytes() == whole


def test_the_folder_is_the_run_folders(host: Path) -> None:
    """The files sent are the run folder's own names (a rename there must change them here)."""
    folder = RunFolder(host / CLONE)
    ours = {
        folder.progress_file,
        folder.handoff_file,
        folder.carry_file,
        folder.inbox_file,
        folder.deliveries_file,
        folder.request_file,
        folder.stop_file,
        folder.resume_file,
        folder.path / ENVIRONMENT_FOLDER,
        folder.saved_session_dir,
        folder.given_session_dir,
    }
    assert {folder.path / sent.name for sent in sending.SENT} == ours


def test_folders_travel_whole_and_only_their_files(host: Path, served: str, tmp_path: Path) -> None:
    """A folder the clone wrote goes up whole, again when it changes, and goes when it goes;
    one serve wrote comes down. Links are left out, and a tar that would write outside its
    folder is refused."""
    clone = tmp_path / "clone"
    (clone / "session" / "state").mkdir(parents=True)
    (clone / "session" / "session.json").write_text("{}\n")
    (clone / "session" / "state" / "a.jsonl").write_text("a\n")
    (clone / "session" / "link").symlink_to("/etc/passwd")
    given = host / CLONE / "session-given"
    (given / "files").mkdir(parents=True)
    (given / "files" / "b.txt").write_text("b\n")

    async def go() -> None:
        relay = relay_for(served, host, clone)
        try:
            await relay.sync()
            assert (host / CLONE / "session" / "state" / "a.jsonl").read_text() == "a\n"
            assert not (host / CLONE / "session" / "link").exists()
            assert (clone / "session-given" / "files" / "b.txt").read_text() == "b\n"
            (clone / "session" / "state" / "a.jsonl").write_text("a2\n")
            await relay.sync()
            assert (host / CLONE / "session" / "state" / "a.jsonl").read_text() == "a2\n"
            shutil.rmtree(clone / "session")
            await relay.sync()
            assert not (host / CLONE / "session").exists()
        finally:
            await relay.aclose()

    asyncio.run(go())
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        entry = tarfile.TarInfo("../../escaped.txt")
        entry.size = 1
        tar.addfile(entry, io.BytesIO(b"x"))
    key = sending.load_key(host)
    with httpx2.Client(base_url=served, trust_env=False) as client:
        answer = client.put(
            sending.path_of(CLONE, "session"),
            content=evil.getvalue(),
            headers={"authorization": f"Bearer {sending.credential(key, CLONE)}"},
        )
    assert answer.status_code == 400
    assert not (host.parent / "escaped.txt").exists() and not (host / "escaped.txt").exists()


def test_a_first_launch_goes_on_from_serves_own_lines(
    host: Path, served: str, tmp_path: Path
) -> None:
    """serve wrote its preparation's notes before the first launch: the clone's progress
    starts from them; a later phase's launch on a machine without the folder is refused."""
    clone = tmp_path / "clone"
    clone.mkdir()
    serves = b'{"step": "prepare", "text": "pushing"}\n'
    (host / CLONE / "progress.jsonl").write_bytes(serves)

    asyncio.run(begun(relay_for(served, host, clone)))
    assert (clone / "progress.jsonl").read_bytes() == serves
    with (clone / "progress.jsonl").open("ab") as out:
        out.write(b'{"step": "target"}\n')
    synced(relay_for(served, host, clone))
    assert (host / CLONE / "progress.jsonl").read_bytes() == serves + b'{"step": "target"}\n'
    (host / CLONE / "handoff.json").write_bytes(b"{}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(RelayError, match="not this machine's"):
        asyncio.run(begun(relay_for(served, host, elsewhere)))
    assert not (elsewhere / "progress.jsonl").exists()


@attrs.define
class Relaying:
    """A launcher's two answers `relay_for_checks` asks for (a `RelayingLauncher`'s)."""

    port: int

    def relay_port(self) -> int | None:
        return self.port

    def host_address(self) -> str:
        return "127.0.0.1"


def test_setups_check_clones_reach_serves_relay_or_one_of_their_own(host: Path) -> None:
    """`shadowclone setup` launches its check clone itself: it reaches serve's relay when that
    listens (which serves check clones too), else one setup runs for the check."""
    check = host / sending.CHECKS_FOLDER / "261206-130000-chek"
    check.mkdir(parents=True)
    (check / "request.json").write_bytes(REQUEST)

    def fetched(access: RelayAccess) -> bytes:
        with httpx2.Client(trust_env=False) as client:
            answer = client.get(
                access.url + sending.path_of(check.name, "request.json"),
                headers={"authorization": f"Bearer {access.credential}"},
            )
        assert answer.status_code == 200, answer.text
        return answer.content

    port = free_port()
    launcher = cast(Launcher, Relaying(port))
    with relay_for_checks(launcher, host) as own:
        assert own is not None and fetched(own(check.name)) == REQUEST
    serves = RelayThread(host, "127.0.0.1", port)
    serves.start()
    try:
        with relay_for_checks(launcher, host) as servers:
            assert servers is not None and fetched(servers(check.name)) == REQUEST
    finally:
        serves.stop()
    with relay_for_checks(cast(Launcher, object()), host) as none:
        assert none is None


def test_a_folder_that_cannot_go_does_not_hold_up_the_progress(
    host: Path, served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sending, "MAX_TREE_BYTES", 10)
    clone = tmp_path / "clone"
    (clone / "session").mkdir(parents=True)
    (clone / "session" / "big.jsonl").write_text("x" * 5000)
    (clone / "progress.jsonl").write_bytes(b'{"final": true}\n')
    with pytest.raises(RelayError, match="more than 10 bytes"):
        synced(relay_for(served, host, clone))
    assert (host / CLONE / "progress.jsonl").read_bytes() == b'{"final": true}\n'
    assert not (host / CLONE / "session").exists()


def test_a_later_phase_goes_on_from_the_notes_serve_wrote_between_phases(
    host: Path, served: str, tmp_path: Path
) -> None:
    """serve prepared the next phase (it pushed the image again, after a restart) and noted
    so in the progress: the next launch takes the notes over; a copy whose start differs from
    the clone's is still refused."""
    clone = tmp_path / "clone"
    clone.mkdir()
    mine = b'{"step": "engine"}\n'
    (clone / "progress.jsonl").write_bytes(mine)
    note = b'{"step": "prepare", "text": "pushing"}\n'
    (host / CLONE / "progress.jsonl").write_bytes(mine + note)

    asyncio.run(begun(relay_for(served, host, clone)))
    assert (clone / "progress.jsonl").read_bytes() == mine + note
    (clone / "progress.jsonl").write_bytes(b'{"step": "review"}\n')
    with pytest.raises(RelayError, match="differs"):
        asyncio.run(begun(relay_for(served, host, clone)))


def test_a_file_that_is_not_a_plain_file_fails_its_round_not_the_relay(
    host: Path, served: str, tmp_path: Path
) -> None:
    """A link where a document should be is refused, never followed, and the other files
    still go: the round fails in one error, and the relay goes on."""
    clone = tmp_path / "clone"
    clone.mkdir()
    secret = tmp_path / "elsewhere.json"
    secret.write_text('{"not": "the clone\'s"}\n')
    (clone / "handoff.json").symlink_to(secret)
    (clone / "progress.jsonl").write_bytes(b'{"n": 1}\n')
    with pytest.raises(MalformedFile, match="symbolic link"):
        synced(relay_for(served, host, clone))
    assert (host / CLONE / "progress.jsonl").read_bytes() == b'{"n": 1}\n'
    assert not (host / CLONE / "handoff.json").exists()
    # the same on serve's side: its link is refused alone, and the inbox still comes down
    (host / CLONE / "stop.json").symlink_to(secret)
    (host / CLONE / "inbox.jsonl").write_bytes(b'{"id": "m1"}\n')
    (clone / "handoff.json").unlink()
    with pytest.raises(RelayError, match="serve answered 400"):
        synced(relay_for(served, host, clone))
    assert (clone / "inbox.jsonl").read_bytes() == b'{"id": "m1"}\n'
    assert not (clone / "stop.json").exists()


def test_serve_decides_the_inbox_close_and_a_silent_serve_holds_up_nothing_else(
    host: Path, served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve closes the inbox only once the engine took every message it accepted; a close
    that must happen while serve is silent waits for it without stopping the run program's
    other work, then closes on the clone's side alone."""
    folder = RunFolder(host / CLONE)
    folder.inbox_file.write_bytes(b'{"id": "m1", "kind": "message", "text": "hi"}\n')
    key = sending.load_key(host)
    link = RelayLink(served, CLONE, sending.credential(key, CLONE))
    assert not asyncio.run(link.close_inbox(frozenset(), force=False))
    assert not folder.inbox_closed_file.exists()
    assert asyncio.run(link.close_inbox(frozenset({"m1"}), force=False))
    assert folder.inbox_closed_file.exists()

    monkeypatch.setattr("shadowclone.run.relay.FORCED_CLOSE_S", 2.0)
    silent = RelayLink(f"http://127.0.0.1:{free_port()}", CLONE, link.credential)

    async def go() -> tuple[bool, int, bool]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        ticking = asyncio.create_task(tick())
        try:
            waiting = await silent.close_inbox(frozenset(), force=False)
            forced = await silent.close_inbox(frozenset(), force=True)
        finally:
            ticking.cancel()
        return waiting, ticks, forced

    waiting, ticks, forced = asyncio.run(go())
    assert not waiting, "an unforced close waits for serve"
    assert forced, "a forced close happens in the end"
    assert ticks >= 20, f"the loop ran only {ticks} times in a 2 s close"
