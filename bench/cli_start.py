"""How long the CLI takes to answer, against `python -c "import click"` in the same run.

Run: `python bench/cli_start.py [--quick]`

Each command runs as a new process (as the owner types it), a few clones in the home, and its
median wall time over the runs is divided by the median of the floor, a Python that imports
click and nothing else. Goal: each at most 5x.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from shadowclone.config import HOME_VARIABLE
from shadowclone_testing.timing import home_with_clones, median_run, record

GOAL = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs: it works, roughly")
    args = parser.parse_args()
    runs = 3 if args.quick else 21
    shadowclone = [sys.executable, "-c", "from shadowclone.cli import entry; entry()"]
    with tempfile.TemporaryDirectory() as tmp:
        ids = home_with_clones(Path(tmp))
        prefix = ids[0][:-1]
        env = {**os.environ, HOME_VARIABLE: tmp}
        floor = median_run([sys.executable, "-c", "import click"], env, runs)
        print(f"floor: python -c 'import click'  {floor * 1000:7.1f} ms (median of {runs})")
        worst = 0.0
        for command in (["--version"], ["--help"], ["list"], ["get", prefix]):
            took = median_run([*shadowclone, *command], env, runs)
            ratio = took / floor
            worst = max(worst, ratio)
            shown = " ".join(command)
            print(f"shadowclone {shown:<16} {took * 1000:7.1f} ms   {ratio:5.1f}x the floor")
            record(
                f"shadowclone {shown.replace(prefix, 'ID-PREFIX')}",
                took,
                floor=floor,
                floor_is="python -c 'import click'",
                at_most_ratio=GOAL,
            )
    print(f"worst: {worst:.1f}x (goal: at most {GOAL:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
