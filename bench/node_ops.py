"""Benchmark: start, list and get with 10,000 run folders, against the same with 10.

Not a test: run `python bench/node_ops.py` (or `make bench`). Speed is reported as a ratio
against the 10-folder baseline measured in the same run, since machines here are noisy.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shadowclone.config import Paths, default_paths, init_config, set_value
from shadowclone.node import schemas
from shadowclone.node.local import LocalNode, local_node
from shadowclone.node.runfolder import RunFolder, new_clone_id
from shadowclone.node.schemas import Record, Request, SetupRecord, State
from shadowclone.node.setups import write_setup
from shadowclone.node.target import Target

REPEAT = 30


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
    start = datetime.now(UTC) - timedelta(days=60)
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
        # Setup only: plain writes, not the fsynced atomic ones, to build 10,000 folders fast.
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


def measure(folders: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        node = make_home(Path(tmp), folders)
        numbers = iter(range(1, 10**6))
        some_id = node.list().clones[0].id
        return {
            "start": timed(lambda: node.start(f"acme/app#{next(numbers)}")),
            "list": timed(node.list),
            "list --all": timed(lambda: node.list(include_all=True), repeat=3),
            "get": timed(lambda: node.get(some_id)),
        }


def main() -> int:
    small = measure(10)
    large = measure(10_000)
    print(f"{'operation':<12} {'10 folders':>12} {'10,000 folders':>16} {'ratio':>8}")
    for name in small:
        print(
            f"{name:<12} {small[name] * 1000:>10.2f}ms {large[name] * 1000:>14.2f}ms "
            f"{large[name] / small[name]:>7.1f}x"
        )
    ok = large["list"] < 0.2
    verdict = "under" if ok else "OVER"
    print(f"list at 10,000 folders: {large['list'] * 1000:.1f} ms ({verdict} 200 ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
