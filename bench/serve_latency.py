"""How fast serve hands a message to a clone, and what serve costs when nothing happens.

Run: `python bench/serve_latency.py [--clones 10] [--messages 200] [--idle 10]`

With N fake clones running (the echo script, which writes a progress line for each delivered
inbox line), it measures, against a real `shadowclone serve` process:
- send -> clone: from `send` (the inbox line's time) to the clone reading the line (its echo
  line's time), over M messages sent one at a time round the clones;
- the clone's own floor in the same run: a line appended straight to a clone's deliveries file
  (no serve) until the clone reads it; and a bare fsync'd append + read of a file;
- serve's CPU use while idle (psutil cpu_times over a few seconds), all clones running;
- final line -> ended record: each clone is told to finish, and the time from its final
  progress line to the record serve writes with its end (goal: under 100 ms median).
The machines are noisy, so compare the figures within one run (see the ratio).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import psutil
from shadowclone import files
from shadowclone.config import HOME_VARIABLE, Paths, default_paths, init_config, set_value
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import InboxKind, InboxLine, ProgressKind, SetupRecord, State
from shadowclone.node.setups import write_setup
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import (
    SCRIPTS_VARIABLE,
    Play,
    Script,
    ScriptsFile,
    write_scripts,
)
from shadowclone_testing.timing import record

SERVE_PROGRAM = "import sys\nfrom shadowclone.cli import main\nsys.exit(main(['serve']))\n"
FINISH = "finish now"
WAIT_S = 60.0


def make_home(root: Path, clones: int) -> tuple[Paths, dict[str, str]]:
    paths = default_paths({HOME_VARIABLE: str(root)})
    init_config(paths)
    for key, value in (
        ("providers.scripted.login", '"no-login"'),
        ("engine", '"scripted"'),
        ("launcher", '"fake"'),
        ("daily_clones", "1000"),
        ("parallel_clones", str(clones)),
    ):
        set_value(paths, key, value)
    write_setup(
        paths, SetupRecord(repo="bench/app", config_version=1, engine="scripted", login="no-login")
    )
    scripts = root / "scripts.json"
    write_scripts(scripts, ScriptsFile(default=Script(play=Play.ECHO, until=FINISH)))
    return paths, {HOME_VARIABLE: str(root), SCRIPTS_VARIABLE: str(scripts)}


def wait(check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def running(paths: Paths, clone_id: str) -> bool:
    record = RunFolder(paths.clones_dir / clone_id).record()
    return record is not None and record.state is State.RUNNING


def wait_for_echo(folder: RunFolder, text: str, offset: list[int]) -> datetime:
    """When the clone wrote its echo of `text` (its own clock, read from its line)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        lines, _, offset[0] = folder.progress(offset[0])
        for line in lines:
            if line.kind is ProgressKind.MESSAGE and line.text == text:
                return line.at
        time.sleep(0.005)
    raise SystemExit(f"timed out waiting for {text!r} to reach clone {folder.id}")


def round_trips(node: LocalNode, ids: list[str], messages: int, direct: bool) -> list[float]:
    """Seconds from the line's time to the clone's echo, one message at a time."""
    folders = [RunFolder(node.paths.clones_dir / clone_id) for clone_id in ids]
    offsets = {f.id: [f.progress()[2]] for f in folders}
    found: list[float] = []
    for number in range(messages):
        folder = folders[number % len(folders)]
        text = f"{'direct' if direct else 'sent'} {number} {secrets.token_hex(4)}"
        if direct:  # what serve would append, without serve
            line = InboxLine(id=secrets.token_hex(8), kind=InboxKind.MESSAGE, text=text)
            files.append_line(folder.deliveries_file, schemas.dumps(line))
        else:
            line = node.send(folder.id, text)
        arrived = wait_for_echo(folder, text, offsets[folder.id])
        found.append((arrived - line.at).total_seconds())
    return found


def endings(node: LocalNode, ids: list[str]) -> list[float]:
    """Seconds from each clone's final line to serve's record of its end, one at a time."""
    found = []
    for clone_id in ids:
        folder = RunFolder(node.paths.clones_dir / clone_id)
        node.send(clone_id, FINISH)

        def ended(folder: RunFolder = folder) -> bool:
            record = folder.record()
            return record is not None and not record.state.active

        wait(ended, "the end")
        record = folder.record()
        final = next(line for line in reversed(folder.progress()[0]) if line.final)
        assert record is not None and record.ended_at is not None
        found.append((record.ended_at - final.at).total_seconds())
    return found


def bare_file_round_trips(root: Path, count: int) -> list[float]:
    path = root / "bare.jsonl"
    found = []
    for number in range(count):
        started = time.perf_counter()
        files.append_line(path, f'{{"n": {number}}}'.encode())
        files.read_lines(path)
        found.append(time.perf_counter() - started)
    return found


def describe(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name:<34} median {statistics.median(ordered) * 1000:7.1f} ms   "
        f"p99 {p99 * 1000:7.1f} ms   (n={len(ordered)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", type=int, default=10)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle measurement")
    parser.add_argument("--quick", action="store_true", help="3 clones, a few messages")
    args = parser.parse_args()
    if args.quick:
        args.clones, args.messages, args.idle = 3, 12, 1.0
    with tempfile.TemporaryDirectory(prefix="shadowclone-bench-") as temp:
        root = Path(temp)
        root.chmod(0o711)  # the fake launcher run as root gives the engine a user of its own
        paths, env = make_home(root, args.clones)
        node = local_node(paths)
        ids = [node.start(f"bench/app#{n}").id for n in range(1, args.clones + 1)]
        serve = subprocess.Popen(
            [sys.executable, "-c", SERVE_PROGRAM],
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        launcher = FakeLauncher(default_state_dir(env))
        try:
            wait(lambda: all(running(paths, c) for c in ids), "the clones to run")
            print(f"{args.clones} echo clones running under serve pid {serve.pid}")
            time.sleep(2.0)  # let start-up settle
            process = psutil.Process(serve.pid)
            before, started = process.cpu_times(), time.monotonic()
            time.sleep(args.idle)
            after, elapsed = process.cpu_times(), time.monotonic() - started
            used = (after.user - before.user) + (after.system - before.system)
            record("serve's idle CPU", 100 * used / elapsed, unit="% of a core", at_most=1.0)
            print(
                f"serve idle CPU: {used:.3f} s over {elapsed:.1f} s = "
                f"{100 * used / elapsed:.2f} % of one core (goal: at most 1 %); "
                f"memory {process.memory_info().rss / 2**20:.0f} MiB with {args.clones} clones"
            )
            rounds = max(20, args.messages // 4)
            print(describe("bare append + read (in process)", bare_file_round_trips(root, 200)))
            direct = round_trips(node, ids, rounds, direct=True)
            print(describe("deliveries append -> clone", direct))
            sent = round_trips(node, ids, args.messages, direct=False)
            print(describe("send -> serve -> clone", sent))
            ratio = statistics.median(sent) / statistics.median(direct)
            print(f"send -> clone median is {ratio:.1f} x the clone's own floor")
            record(
                "send -> clone",
                statistics.median(sent),
                floor=statistics.median(direct),
                floor_is="deliveries append -> clone",
            )
            ended = endings(node, ids)
            print(describe("final line -> ended record", ended), "(goal: 100 ms)")
            record("final line -> ended record", statistics.median(ended), at_most=0.1)
        finally:
            serve.terminate()
            serve.wait(WAIT_S)
            for status in launcher.running():
                launcher.remove(status.clone_id)


if __name__ == "__main__":
    main()
