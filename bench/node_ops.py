"""Benchmark: start, list and get by id prefix with 100,000 run folders, against the same with
10; and `shadowclone list --all` in a process of its own against reading and parsing the same
folders in this one.

Run: `python bench/node_ops.py [--quick]` (quick: 2,000 folders, a few runs). Speed is reported
as ratios against the baseline measured in the same run, since machines here are noisy. Goals:
start, list and get within 2x of their time at 10 folders, and no start slower than 50 ms at
100,000 (the 99th percentile of `STARTS` starts); `list --all` within 1.5x of the in-process
floor, its memory under 100 MiB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shadowclone.config import Paths, default_paths, init_config, set_value
from shadowclone.node import schemas
from shadowclone.node.ids import new_clone_id
from shadowclone.node.index import CloneIndex
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, Request, SetupRecord, State
from shadowclone.node.setups import write_setup
from shadowclone.node.target import Target
from shadowclone.plugin.node import LocalNode, local_node
from shadowclone_testing.timing import record

REPEAT = 30
STARTS = 200
START_P99_GOAL_S = 0.050
MEASURED_CLI = (
    "import re, sys\n"
    "from shadowclone.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read()\n"
    "print(re.search(r'VmHWM:\\s*(\\d+)', status).group(1), file=sys.stderr)\n"
    "sys.exit(code)\n"
)
"""The CLI, telling its own peak memory (KiB) as its last word on stderr: VmHWM, its own since
it started (a forked child's `ru_maxrss` counts the parent's pages it started with)."""


def make_home(root: Path, folders: int) -> LocalNode:
    paths: Paths = default_paths({"SHADOWCLONE_HOME": str(root)})
    init_config(paths)
    for key, value in (
        ("providers.scripted.login", '"no-login"'),
        ("engine", '"scripted"'),
        ("daily_clones", "100000"),
    ):
        set_value(paths, key, value)
    write_setup(
        paths, SetupRecord(repo="acme/app", config_version=1, engine="scripted", login="no-login")
    )
    start = datetime.now(UTC) - timedelta(minutes=folders + 10)
    for index in range(folders):
        at = start + timedelta(minutes=index)
        folder = RunFolder(paths.clones_dir / new_clone_id(at))
        folder.path.mkdir(parents=True)
        request = Request(
            id=folder.id,
            target=Target("acme", "app", 100000 + index),
            engine="scripted",
            login="no-login",
            launcher="fake",
            image="x",
            github_url="https://github.com",
            github_api_url="https://api.github.com",
            requested_at=at,
        )
        # Setup only: plain writes, not the fsynced atomic ones, to build the folders fast.
        folder.request_file.write_bytes(schemas.dumps(request))
        folder.record_file.write_bytes(schemas.dumps(Record(id=folder.id, state=State.DONE)))
    node = local_node(paths)
    node.registry  # noqa: B018 - plugins load once, outside the timings
    return node


def timed(action: Callable[[], object], repeat: int = REPEAT) -> float:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def measure(folders: int, repeat: int, starts: int) -> tuple[dict[str, float], float]:
    """The median of each operation, and the 99th percentile of `starts` starts (each a queued
    clone more, as when serve is down)."""
    with tempfile.TemporaryDirectory() as tmp:
        node = make_home(Path(tmp), folders)
        numbers = iter(range(1, 10**6))
        node.start(f"acme/app#{next(numbers)}")  # builds the index from the folders, once
        some_id = node.list().clones[-1].id
        each = sorted(
            timed(lambda: node.start(f"acme/app#{next(numbers)}"), 1) for _ in range(starts)
        )
        medians = {
            "start": statistics.median(each),
            "list": timed(node.list, repeat),
            "get by prefix": timed(lambda: node.get(some_id[:-1]), repeat),
        }
        return medians, each[min(len(each) - 1, int(0.99 * len(each)))]


def list_all(folders: int) -> tuple[float, float, float]:
    """`shadowclone list --all` in its own process: its time, its peak memory (MiB), and the
    in-process floor: every folder's request and record read and parsed, nothing else."""
    with tempfile.TemporaryDirectory() as tmp:
        node = make_home(Path(tmp), folders)
        CloneIndex(node.paths.clones_dir).ensure()
        began = time.perf_counter()
        for folder in (RunFolder(node.paths.clones_dir / i) for i in node.index.newest()):
            folder.request()
            folder.record()
        floor = time.perf_counter() - began
        env = {**os.environ, "SHADOWCLONE_HOME": tmp}
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", MEASURED_CLI, "list", "--all"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=True,
        )
        took = time.perf_counter() - began
        peak = int(done.stderr.split()[-1]) / 1024
        return took, floor, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 folders, a few runs")
    args = parser.parse_args()
    many = 2_000 if args.quick else 100_000
    repeat = 5 if args.quick else REPEAT
    starts = 20 if args.quick else STARTS
    small, _ = measure(10, repeat, starts)
    large, p99 = measure(many, repeat, starts)
    print(f"{'operation':<14} {'10 folders':>12} {f'{many:,} folders':>18} {'ratio':>8}")
    for name in small:
        record(
            f"{name} at {many:,} clones",
            large[name],
            floor=small[name],
            floor_is="the same at 10",
            at_most_ratio=2.0,
        )
        print(
            f"{name:<14} {small[name] * 1000:>10.2f}ms {large[name] * 1000:>16.2f}ms "
            f"{large[name] / small[name]:>7.2f}x   (goal: at most 2x)"
        )
    print(
        f"start at {many:,}: 99th percentile of {starts} {p99 * 1000:.1f} ms "
        f"(goal: under {START_P99_GOAL_S * 1000:.0f} ms)"
    )
    record(f"start at {many:,} clones, 99th percentile", p99, at_most=START_P99_GOAL_S)
    took, floor, peak = list_all(many)
    record(
        f"list --all at {many:,} clones",
        took,
        floor=floor,
        floor_is="reading and parsing in process",
        at_most_ratio=1.5,
    )
    record(f"list --all at {many:,} clones, peak memory", peak, unit="MiB", at_most=100.0)
    print(
        f"list --all at {many:,}: {took:.2f} s in the CLI against {floor:.2f} s reading and "
        f"parsing in-process: {took / floor:.2f}x (goal: at most 1.5x); "
        f"peak memory {peak:.0f} MiB (goal: under 100)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
