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


def test_the_docker_benchmark_compares_two_images_on_a_larger_repository() -> None:
    """`--against` and `--files` (the paired runs that show small changes) still run."""
    from shadowclone_testing.containers import clone_image, docker_client

    client = docker_client()
    image = clone_image(client)
    if os.geteuid() != 0:
        skip_or_fail("the Docker benchmark runs serve as root, as CI does")
    other = "shadowclone-bench-against:test"
    client.images.get(image).tag(other)
    try:
        arguments = ["--quick", "--engine", "claude", "--against", other, "--files", "150"]
        done = subprocess.run(
            [sys.executable, str(BENCH / "docker_start.py"), "--image", image, *arguments],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        client.images.remove(other, noprune=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "2 runs, 150 files" in done.stdout
    assert f"the same on {other}" in done.stdout
    assert "median of the runs' differences" in done.stdout
