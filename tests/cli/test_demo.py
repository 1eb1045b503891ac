"""`shadowclone demo` runs one whole clone with no account and no Docker, and says so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from shadowclone_testing.harness import run_shadowclone


def test_the_demo_runs_a_whole_clone_and_prints_its_pull_request() -> None:
    result = run_shadowclone("demo")
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    out = result.out
    assert re.search(r"question q1: Which greeting style", out)
    assert re.search(r"\$ shadowclone answer \S+ q1 friendly", out)
    assert re.search(r"pull request http://127\.0\.0\.1:\d+/you/hello/pull/\d+", out)
    assert "Hello, in a friendly style!" in out
    assert "final report" in out and "outcome: done" in out


def test_without_the_fake_launchers_distribution_the_demo_names_the_package_to_add(
    tmp_path: Path,
) -> None:
    """The fakes ship apart from the core: an install without them gets one line saying what to
    add, and leaves no temporary home behind."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            # The kit's entry points hidden, as in an install without it.
            "import importlib.metadata as metadata\n"
            "found = metadata.entry_points\n"
            "metadata.entry_points = lambda **kw: [e for e in found(**kw)\n"
            "    if e.dist is None or e.dist.name != 'shadowclone-testing']\n"
            "from shadowclone.cli import entry; entry()",
            "demo",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "the command demo needs the shadowclone-testing distribution" in lines[0]
    assert "--with shadowclone-testing" in lines[0]
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
