"""A repository of real size for tests and benchmarks: `FILES` files and over 200 MB of history
(`COMMITS` commits), made once with `git fast-import` and kept in the user's cache folder
between runs (made again when its recipe changes: `RECIPE` is in its name).

The files hold random bytes, so that git cannot compress the history away: what a clone of it
transfers and writes is what a clone of a large real repository would.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import platformdirs

FILES = 50_000
FILE_BYTES = 2048
COMMITS = 21
"""The first commit writes every file; each later one rewrites `FILES // 20` of them."""
RECIPE = f"{FILES}-{FILE_BYTES}-{COMMITS}-1"
COMPLETE = "shadowclone-complete"


def real_size_repository(cache: Path | None = None) -> Path:
    """The bare repository (its branch `main`), made at the first call on this machine."""
    folder = cache or platformdirs.user_cache_path("shadowclone-tests")
    path = folder / f"real-size-{RECIPE}.git"
    if (path / COMPLETE).is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    building = folder / f"{path.name}.{os.getpid()}.new"
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run(
        ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(building)], check=True
    )
    importer = subprocess.Popen(
        ["git", "-C", str(building), "fast-import", "--quiet", "--depth=0"],
        stdin=subprocess.PIPE,
    )
    assert importer.stdin is not None
    for chunk in _stream():
        importer.stdin.write(chunk)
    importer.stdin.close()
    if importer.wait() != 0:
        raise RuntimeError("git fast-import failed making the real-size repository")
    (building / COMPLETE).write_bytes(b"")
    try:
        building.rename(path)
    except OSError:  # another process made it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return path


def _stream() -> Iterator[bytes]:
    """The fast-import commands: the commits in order on `main`, each with its files inline."""
    chosen = random.Random(RECIPE)
    for number in range(COMMITS):
        when = 1_700_000_000 + number * 3600
        message = b"Initial commit" if number == 0 else f"Change {number}".encode()
        yield (
            b"commit refs/heads/main\n"
            + f"committer Real Size <real-size@example.com> {when} +0000\n".encode()
            + f"data {len(message)}\n".encode()
            + message
            + b"\n"
        )
        changed = range(FILES) if number == 0 else chosen.sample(range(FILES), FILES // 20)
        for index in changed:
            blob = os.urandom(FILE_BYTES)
            path = f"src/p{index % 250}/m{index}.bin"
            yield f"M 644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n"
        yield b"\n"
