"""The run program on a machine that shares no folder with the owner's: its entry point, as the
clone image runs it, in a run folder of its own that starts empty, kept in step with serve's
copy through serve's relay (a real HTTP server on loopback). The request comes down, a message
comes down mid-run and reaches the engine, the progress and the final line go up, and serve
decides the inbox's close."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs
from shadowclone import contract, files
from shadowclone.node import sending
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import INBOX_CLOSED, InboxKind, InboxLine, ProgressKind, dumps
from shadowclone.plugin.types import Outcome
from shadowclone.relay.server import RelayThread
from shadowclone_testing.clone_world import World, models
from shadowclone_testing.containers import MESSAGE, script
from shadowclone_testing.fakes.models import Shell, Text

CLONE = "261206-120000-rely"


def run_program(
    world: World, host: RunFolder, elsewhere: Path, port: int
) -> subprocess.CompletedProcess[str]:
    """The run program as the clone image starts it, in `elsewhere`, with serve's relay."""
    credential = sending.credential(sending.load_key(host.path.parent), CLONE)
    return subprocess.run(
        [sys.executable, "-m", "shadowclone.run"],
        env={
            **os.environ,
            contract.RUN_FOLDER_VARIABLE: str(elsewhere),
            contract.SECRETS_VARIABLE: str(world.secrets()),
            contract.CLONE_ID_VARIABLE: CLONE,
            contract.RELAY_VARIABLE: f"http://127.0.0.1:{port}",
            contract.RELAY_CREDENTIAL_VARIABLE: credential,
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_clone_whose_run_folder_travels_opens_its_pull_request_and_hears_a_message(
    world: World, tmp_path: Path
) -> None:
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Add a greeting")
    host = RunFolder(tmp_path / "clones" / CLONE)
    elsewhere = tmp_path / "worker" / "run"
    elsewhere.mkdir(parents=True)
    with models() as server:
        script(
            server,
            Shell("echo hello > GREETING.md"),
            Text("word " * 200, chunk_delay_s=0.1),  # still streaming when the message comes
            Text("Added GREETING.md."),
            on_message=Shell("echo hi >> GREETING.md", text="Adding the line."),
        )
        made = world.folder(number, server)
        host.path.mkdir(parents=True)
        host.write_request(attrs.evolve(made.request(), id=CLONE))
        relay = RelayThread(host.path.parent, "127.0.0.1")
        port = relay.start()

        def send_once_working() -> None:
            deadline = time.monotonic() + 300
            while len(server.model_requests()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            line = InboxLine(id="m-1", kind=InboxKind.MESSAGE, text=MESSAGE)
            host.append_inbox(line)  # as `send` does, on the owner's machine
            files.append_line(host.deliveries_file, dumps(line))  # as serve does

        sender = threading.Thread(target=send_once_working)
        sender.start()
        try:
            done = run_program(world, host, elsewhere, port)
        finally:
            sender.join()
            relay.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    lines, problems, _ = host.progress()
    assert problems == [] and lines, "serve's copy holds the clone's progress, whole"
    assert (host.path / "progress.jsonl").read_bytes() == (
        elsewhere / "progress.jsonl"
    ).read_bytes()
    final = lines[-1]
    texts = [line.text for line in lines]
    assert final.final and final.outcome is Outcome.DONE, texts
    assert [line.text for line in lines if line.kind is ProgressKind.MESSAGE] == [MESSAGE]
    assert texts.index(INBOX_CLOSED) > texts.index(MESSAGE)
    assert host.inbox_closed_file.exists(), "serve decided the close, under its inbox lock"
    [pull] = gh.pull_requests("owner/app")
    assert final.pr_url is not None and final.pr_url.endswith(f"/pull/{pull.number}")
    assert pull.pull is not None
    assert gh.read_file("owner/app", pull.pull.head_ref, "GREETING.md") == "hello\nhi\n"
    assert not (host.path / "workspace").exists(), "the workspace stayed where the clone ran"


def test_a_later_launch_on_a_machine_without_the_run_folder_does_not_start_again(
    world: World, tmp_path: Path
) -> None:
    """serve holds the clone's handoff to a later phase and the clone's machine none of its
    progress: the run program refuses in one line before reading anything (it would
    otherwise begin the work again from nothing)."""
    host = RunFolder(tmp_path / "clones" / CLONE)
    host.path.mkdir(parents=True)
    with models() as server:
        host.write_request(attrs.evolve(world.folder(1, server).request(), id=CLONE))
    (host.path / "progress.jsonl").write_bytes(b'{"step": "target"}\n')
    (host.path / "handoff.json").write_bytes(b'{"network": "model-only"}\n')
    elsewhere = tmp_path / "other-worker"
    elsewhere.mkdir()
    relay = RelayThread(host.path.parent, "127.0.0.1")
    port = relay.start()
    try:
        done = run_program(world, host, elsewhere, port)
    finally:
        relay.stop()
    assert done.returncode == 2
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and "not this machine's" in said[0], done.stderr
    assert not (elsewhere / "workspace").exists()
    assert (host.path / "progress.jsonl").read_bytes() == b'{"step": "target"}\n'
