"""What the benchmarks share: each figure they measure, recorded for the one table of
`scripts/bench-table` (`record`); a command's median wall time as new processes, and a home
with a few queued clones to time it on (bench/cli_start.py, bench/completion.py)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from shadowclone.config import HOME_VARIABLE, default_paths, init_config, set_value
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import write_setup
from shadowclone.plugin.node import local_node

RESULTS_VARIABLE = "SHADOWCLONE_BENCH_RESULTS"
"""Names the file (JSON lines) a benchmark appends each recorded figure to."""


def record(
    measure: str,
    value: float,
    *,
    unit: str = "s",
    floor: float | None = None,
    floor_is: str = "",
    at_most_ratio: float | None = None,
    at_most: float | None = None,
) -> None:
    """One figure of the running benchmark: its value, the floor it is measured against in the
    same run (what `floor_is`), and its goals (a ratio to the floor, an absolute bound), for
    `scripts/bench-table`. Nothing happens unless `RESULTS_VARIABLE` names a file."""
    target = os.environ.get(RESULTS_VARIABLE)
    if not target:
        return
    line = {
        "bench": Path(sys.argv[0]).stem,
        "measure": measure,
        "value": value,
        "unit": unit,
        "floor": floor,
        "floor_is": floor_is,
        "at_most_ratio": at_most_ratio,
        "at_most": at_most,
    }
    with open(target, "a", encoding="utf-8") as results:
        results.write(json.dumps(line) + "\n")


def median_run(argv: Sequence[str], env: Mapping[str, str], runs: int) -> float:
    """The median wall time of `runs` runs of `argv`, each a new process."""
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(list(argv), env=dict(env), stdout=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def home_with_clones(root: Path, count: int = 5) -> list[str]:
    """A home at `root` (the scripted engine, acme/app set up) with `count` queued clones;
    their ids, oldest first."""
    paths = default_paths({HOME_VARIABLE: str(root)})
    init_config(paths)
    for key, value in (("providers.scripted.login", '"no-login"'), ("engine", '"scripted"')):
        set_value(paths, key, value)
    write_setup(
        paths, SetupRecord(repo="acme/app", config_version=1, engine="scripted", login="no-login")
    )
    node = local_node(paths)
    return [node.start(f"acme/app#{number}").id for number in range(1, count + 1)]
