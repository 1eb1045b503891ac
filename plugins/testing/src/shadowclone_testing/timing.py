"""What the start-up benchmarks share (bench/cli_start.py, bench/completion.py): a command's
median wall time as new processes, and a home with a few queued clones to time it on."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from shadowclone.config import HOME_VARIABLE, default_paths, init_config, set_value
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import write_setup
from shadowclone.plugin.node import local_node


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
