"""How long the CLI takes to answer, against `python -c "import click"` in the same run.

Run: `python bench/cli_start.py [--quick]`

Each command runs as a new process (as the owner types it), a few clones in the home, and its
median wall time over the runs is divided by the median of the floor, a Python that imports
click and nothing else. Goal: each at most 5x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from shadowclone.config import HOME_VARIABLE, default_paths, init_config, set_value
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import write_setup
from shadowclone.plugin.node import local_node

GOAL = 5.0


def timed(argv: Sequence[str], env: dict[str, str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def make_home(root: Path) -> str:
    paths = default_paths({HOME_VARIABLE: str(root)})
    init_config(paths)
    for key, value in (("providers.scripted.login", '"no-login"'), ("engine", '"scripted"')):
        set_value(paths, key, value)
    write_setup(
        paths, SetupRecord(repo="acme/app", config_version=1, engine="scripted", login="no-login")
    )
    node = local_node(paths)
    views = [node.start(f"acme/app#{number}") for number in range(1, 6)]
    return views[0].id[:-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs: it works, roughly")
    args = parser.parse_args()
    runs = 3 if args.quick else 21
    shadowclone = [sys.executable, "-c", "from shadowclone.cli import entry; entry()"]
    with tempfile.TemporaryDirectory() as tmp:
        prefix = make_home(Path(tmp))
        env = {**os.environ, HOME_VARIABLE: tmp}
        floor = timed([sys.executable, "-c", "import click"], env, runs)
        print(f"floor: python -c 'import click'  {floor * 1000:7.1f} ms (median of {runs})")
        worst = 0.0
        for command in (["--version"], ["--help"], ["list"], ["get", prefix]):
            took = timed([*shadowclone, *command], env, runs)
            ratio = took / floor
            worst = max(worst, ratio)
            shown = " ".join(command)
            print(f"shadowclone {shown:<16} {took * 1000:7.1f} ms   {ratio:5.1f}x the floor")
    print(f"worst: {worst:.1f}x (goal: at most {GOAL:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
