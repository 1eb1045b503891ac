"""How long the MCP server takes to answer `initialize`, started as an assistant starts it
(`shadowclone mcp` on stdio), against a Python that imports click and nothing else (the CLI's
floor) and one that imports the mcp SDK, in the same run.

Run: `python bench/mcp_start.py [--quick]`

Goal: under 0.5 s of wall time, within 5x the click floor (as the CLI's commands): the answer
is written before the SDK is imported (`shadowclone/mcp/early.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from shadowclone.config import HOME_VARIABLE, default_paths, init_config
from shadowclone_testing.timing import record

GOAL = 5.0
GOAL_S = 0.5
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def answered(env: dict[str, str]) -> float:
    """Seconds from the server's start to its answer to `initialize`."""
    began = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-c", "from shadowclone.cli import entry; entry()", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        took = time.perf_counter() - began
        assert answer.get("id") == 1 and "result" in answer, answer
        return took
    finally:
        server.kill()
        server.wait()


def floor(env: dict[str, str], module: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], env=env, check=True)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs: it works, roughly")
    args = parser.parse_args()
    runs = 3 if args.quick else 11
    with tempfile.TemporaryDirectory() as tmp:
        init_config(default_paths({HOME_VARIABLE: tmp}))
        env = {**os.environ, HOME_VARIABLE: tmp}
        base = statistics.median(floor(env, "click") for _ in range(runs))
        sdk = statistics.median(floor(env, "mcp.server") for _ in range(runs))
        took = statistics.median(answered(env) for _ in range(runs))
    record(
        "initialize answered",
        took,
        floor=base,
        floor_is="python -c 'import click'",
        at_most_ratio=GOAL,
        at_most=GOAL_S,
    )
    print(f"floor: python -c 'import click'       {base * 1000:7.1f} ms (median of {runs})")
    print(f"the SDK: python -c 'import mcp.server' {sdk * 1000:7.1f} ms")
    print(
        f"initialize answered in {took * 1000:7.1f} ms  {took / base:5.2f}x the floor "
        f"(goal: at most {GOAL:.0f}x and {GOAL_S * 1000:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
