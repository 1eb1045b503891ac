"""How long a clone of a repository of real size (the kit's `bigrepo`: 50,000 files, over 200 MB
of history) takes in Docker from `start` to its engine's first model request, with its cache
warm and cold, against floors measured in the same run:
- warm: the same launch on a ten-file repository, plus a local `git clone --shared` (with its
  checkout) of a mirror of the large one; goal: at most 1.2x;
- cold (the cache emptied before each run): the same small launch plus a bare
  `git clone --filter=blob:none` of the large repository from the same fake GitHub; goal: at
  most 1.1x (not met: a clone fetches the whole history, since an engine with no network could
  not fetch what a partial clone leaves out).

Run (root, after scripts/start-docker and scripts/build-image):
`python bench/repo_start.py [--runs 3] [--quick]`. Each launch is `bench/docker_start.py` (Claude
Code), run as a process of its own with `--repository` and `--cold`. `--quick` (what the tests
run) measures the warm cache only, once: the cold figure alone fetches the whole history
twice more, minutes of CI for a path `tests/docker/test_repo_cache.py` already takes.
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
from pathlib import Path

from shadowclone_testing.bigrepo import real_size_repository
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.timing import RESULTS_VARIABLE, record

BENCH = Path(__file__).resolve().parent
WARM_GOAL = 1.2
COLD_GOAL = 1.1


def launch(runs: int, *options: str) -> float:
    """The median start -> first model request of `bench/docker_start.py` with `options`."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as results:
        env = {**os.environ, RESULTS_VARIABLE: results.name}
        argv = [sys.executable, str(BENCH / "docker_start.py"), "--engine", "claude"]
        done = subprocess.run(
            [*argv, "--runs", str(runs), *options],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"docker_start.py {' '.join(options)} failed:\n{done.stderr[-3000:]}")
        rows = [json.loads(line) for line in Path(results.name).read_text().splitlines()]
    [row] = [row for row in rows if row["measure"] == "claude: start -> first model request"]
    return float(row["value"])


def timed_git(*args: str, cwd: Path) -> float:
    began = time.perf_counter()
    subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True)
    return time.perf_counter() - began


def git_floors(repository: Path, runs: int, fetched: bool = True) -> tuple[float, float]:
    """The median local `git clone --shared` of a mirror of `repository`, and (when `fetched`,
    else 0) the median `git clone --filter=blob:none` of it from a fake GitHub on loopback."""
    shared: list[float] = []
    partial: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-repo-") as temp:
        root = Path(temp)
        subprocess.run(
            ["git", "clone", "--quiet", "--bare", str(repository), "mirror.git"],
            cwd=root,
            check=True,
        )
        with FakeGitHub(root / "github") as github:
            github.create_repo("owner/big", from_bare=repository, private=False)
            url = f"{github.url}/owner/big.git"
            for run in range(runs):
                shared.append(
                    timed_git("clone", "-q", "--shared", "mirror.git", f"s{run}", cwd=root)
                )
                if fetched:
                    partial.append(
                        timed_git("clone", "-q", "--filter=blob:none", url, f"p{run}", cwd=root)
                    )
    return statistics.median(shared), statistics.median(partial) if partial else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="one run, warm cache only: it works, roughly"
    )
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    repository = real_size_repository()
    small = launch(runs, "--files", "10")
    warm = launch(runs, "--repository", str(repository))
    shared, partial = git_floors(repository, runs, fetched=not args.quick)
    print(f"repository {repository} ({runs} runs each)")
    print(f"small repository, start -> first model request   {small:6.2f} s")
    print(f"git clone --shared of a mirror (local)            {shared:6.2f} s")
    print(f"warm cache, start -> first model request          {warm:6.2f} s")
    print(f"ratio: warm {warm / (small + shared):.2f}x (goal: at most {WARM_GOAL}x)")
    record(
        "warm cache: start -> first model request",
        warm,
        floor=small + shared,
        floor_is="small launch + git clone --shared",
        at_most_ratio=WARM_GOAL,
    )
    if args.quick:
        return 0
    cold = launch(runs, "--repository", str(repository), "--cold")
    print(f"git clone --filter=blob:none from the fake GitHub {partial:6.2f} s")
    print(f"cold cache, start -> first model request          {cold:6.2f} s")
    print(f"ratio: cold {cold / (small + partial):.2f}x (goal: at most {COLD_GOAL}x)")
    record(
        "cold cache: start -> first model request",
        cold,
        floor=small + partial,
        floor_is="small launch + git clone --filter=blob:none",
        at_most_ratio=COLD_GOAL,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
