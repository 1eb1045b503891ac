"""How long a TAB takes: shell completion of a command's name, an option's value and a clone
id, each a new process as the shell starts it, against `python -c "import click"` in the same
run.

Run: `python bench/completion.py [--quick]`

Goal: every TAB under 100 ms; a command's name within 2x the floor, an engine (the command's
module, then the engines as `completion-cache.json` keeps them) within 2.5x, a clone id (which
reads the clones folder) within 5x.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from shadowclone.config import HOME_VARIABLE
from shadowclone_testing.timing import home_with_clones, median_run, record

GOALS = {"command name": 2.0, "engine": 2.5, "clone id": 5.0}
GOAL_S = 0.1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs: it works, roughly")
    args = parser.parse_args()
    runs = 3 if args.quick else 21
    program = [sys.executable, "-c", "from shadowclone.cli import entry; entry()"]
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        ids = home_with_clones(Path(tmp))
        prefix = ids[0][:6]
        env = {**os.environ, HOME_VARIABLE: tmp, "_SHADOWCLONE_COMPLETE": "bash_complete"}
        floor = median_run([sys.executable, "-c", "import click"], env, runs)
        print(f"floor: python -c 'import click'  {floor * 1000:7.1f} ms (median of {runs})")
        for what, words in (
            ("command name", "shadowclone st"),
            ("engine", "shadowclone start --engine cl"),
            ("clone id", f"shadowclone get {prefix}"),
        ):
            cword = str(len(words.split(" ")) - 1)
            took = median_run(program, {**env, "COMP_WORDS": words, "COMP_CWORD": cword}, runs)
            ratio = took / floor
            worst = max(worst, ratio / GOALS[what], took / GOAL_S)
            record(
                f"TAB: {what}",
                took,
                floor=floor,
                floor_is="python -c 'import click'",
                at_most_ratio=GOALS[what],
                at_most=GOAL_S,
            )
            print(
                f"{what:<13} {words!r:<34} {took * 1000:7.1f} ms  {ratio:5.1f}x the floor "
                f"(goal: at most {GOALS[what]:g}x and {GOAL_S * 1000:.0f} ms)"
            )
    print(f"worst against its goal: {worst:.2f} (1.00 is the goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
