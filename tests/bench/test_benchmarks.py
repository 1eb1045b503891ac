"""Every benchmark in bench/ still runs: each in its quick mode, as a process of its own.

The figures are not checked here (speed is never asserted in a test; `make bench` runs them in
full and prints each ratio): only that the benchmark finishes and prints its figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shadowclone_testing.harness import skip_or_fail

BENCH = Path(__file__).resolve().parents[2] / "bench"
DOCKER = {"docker_start.py", "env_ready.py"}
"""Benchmarks that need the Docker engine and the clone image (as the Docker tests do)."""


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
def test_the_benchmark_runs_in_its_quick_mode(script: str) -> None:
    if script in DOCKER:
        from shadowclone_testing.containers import clone_image, docker_client

        clone_image(docker_client())
        if os.geteuid() != 0:
            skip_or_fail("the Docker benchmark runs serve as root, as CI does")
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip(), "it printed its figures"
    assert "Traceback" not in done.stderr
