"""The swarm benchmark still runs, in its quick mode, on this session's swarm: a swarm of its
own would cost CI a second image push and three pulls (the other benchmarks run in
tests/bench)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from shadowclone_testing.harness import skip_or_fail
from shadowclone_testing.swarm import Swarm
from shadowclone_testing.timing import RESULTS_VARIABLE

BENCH = Path(__file__).resolve().parents[3] / "bench" / "swarm_launch.py"


def test_the_swarm_benchmark_runs_on_the_sessions_swarm(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path
) -> None:
    """It prints its ratio and records one figure with its floor."""
    if os.geteuid() != 0:
        skip_or_fail("the swarm benchmark runs serve as root, as CI does")
    results = tmp_path / "results.jsonl"
    arguments = ["--quick", "--on", sc_swarm.manager_url, sc_swarm.registry, str(tmp_path)]
    done = subprocess.run(
        [sys.executable, str(BENCH), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, RESULTS_VARIABLE: str(results)},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "ratio:" in done.stdout and "Traceback" not in done.stderr
    [row] = [json.loads(line) for line in results.read_text().splitlines()]
    assert row["bench"] == "swarm_launch" and row["floor"] > 0 and row["value"] > 0
