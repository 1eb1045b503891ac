"""The repository's cache filled by separate processes, as clones fill it: side by side, and
after a fill killed midway (real git, a repository served from a local folder)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shadowclone.run.repocache import COMPLETE, MIRROR, fill

FILES = 1500


def make_repository(path: Path) -> str:
    """A bare repository of `FILES` files of random bytes (about 12 MB, so a clone of it takes
    a while); its url."""
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    stream = bytearray(b"commit refs/heads/main\ncommitter T <t@example.com> 0 +0000\n")
    stream += b"data 4\ninit\n"
    for number in range(FILES):
        blob = os.urandom(8192)
        stream += f"M 644 inline files/{number}.bin\ndata {len(blob)}\n".encode() + blob + b"\n"
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet"], input=bytes(stream), check=True
    )
    subprocess.run(["git", "-C", str(path), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    return f"file://{path}"


def start_fill(cache: Path, workspace: Path, url: str) -> subprocess.Popen[bytes]:
    workspace.mkdir(parents=True)
    return subprocess.Popen(
        [sys.executable, "-m", "shadowclone.run.repocache", str(cache), url],
        cwd=workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,
    )


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_repository(tmp_path_factory.mktemp("origin") / "app.git")


def test_fills_side_by_side_make_one_mirror_and_whole_workspaces(
    origin: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    fills = [start_fill(cache, tmp_path / f"w{n}", origin) for n in range(4)]
    for process in fills:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    assert (cache / MIRROR / COMPLETE).is_file()
    for n in range(4):
        assert len(list((tmp_path / f"w{n}" / "files").iterdir())) == FILES


def test_a_fill_killed_midway_leaves_a_cache_the_next_fill_makes_whole(
    origin: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    killed = start_fill(cache, tmp_path / "first", origin)
    deadline = time.monotonic() + 60
    while not (cache / f"{MIRROR}.new").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    assert not (cache / MIRROR / COMPLETE).exists()
    (tmp_path / "second").mkdir()
    fill(cache, tmp_path / "second", origin)
    assert (cache / MIRROR / COMPLETE).is_file() and not (cache / f"{MIRROR}.new").exists()
    assert len(list((tmp_path / "second" / "files").iterdir())) == FILES
    checked = subprocess.run(
        ["git", "-C", str(cache / MIRROR), "fsck", "--no-progress"],
        capture_output=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
