"""Every benchmark in bench/ still runs: each in its quick mode, as a process of its own.

The figures are not checked here (speed is never asserted in a test; `make bench` runs them in
full and prints each ratio): only that the benchmark finishes and prints its figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shadowclone_testing.harness import skip_or_fail
from shadowclone_testing.timing import RESULTS_VARIABLE

BENCH = Path(__file__).resolve().parents[2] / "bench"
DOCKER = {"docker_start.py", "env_ready.py", "repo_start.py"}
"""Benchmarks that need the Docker engine and the clone image (as the Docker tests do)."""
ELSEWHERE = {"swarm_launch.py"}
"""Run by the swarm launcher's tests, on their swarm (plugins/swarm_launch/tests/test_bench.py)."""


@pytest.mark.parametrize(
    "script", sorted(p.name for p in BENCH.glob("*.py") if p.name not in ELSEWHERE)
)
def test_the_benchmark_runs_in_its_quick_mode(script: str, tmp_path: Path) -> None:
    """It finishes, prints its figures, and records them for the one table (each with a
    floor measured in the same run or an absolute goal)."""
    if script in DOCKER:
        from shadowclone_testing.containers import clone_image, docker_client

        clone_image(docker_client())
        if os.geteuid() != 0:
            skip_or_fail("the Docker benchmark runs serve as root, as CI does")
    results = tmp_path / "results.jsonl"
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, RESULTS_VARIABLE: str(results)},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip(), "it printed its figures"
    assert "Traceback" not in done.stderr
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert rows, "it recorded its figures"
    for row in rows:
        assert row["bench"] == script.removesuffix(".py") and row["value"] >= 0
        assert row["floor"] is None or row["floor"] > 0
        assert row["floor"] is not None or row["at_most"] is not None, row


def test_the_table_runs_benchmarks_and_compares_two_runs(tmp_path: Path) -> None:
    """`make bench`'s table: each recorded figure a row with its ratio and goal, the whole
    run as JSON, and an earlier run's ratios beside when asked."""
    table = [sys.executable, str(BENCH.parent / "scripts" / "bench-table"), "--quick"]
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    for out, more in ((first, []), (second, ["--compare", str(first)])):
        done = subprocess.run(
            [*table, "--only", "mcp_start", "--out", str(out), *more],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(second.read_text())
    [row] = document["rows"]
    assert (row["bench"], row["measure"], row["at_most_ratio"]) == (
        "mcp_start",
        "initialize answered",
        5.0,
    )
    assert document["failed"] == [] and document["quick"] is True
    header, *lines = [line for line in done.stdout.splitlines() if "│" in line or "┃" in line]
    assert "before" in header and "initialize answered" in lines[0]
    refused = subprocess.run(
        [*table, "--only", "no_such_bench"], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2 and "no such benchmark: no_such_bench" in refused.stderr


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
