"""What shadowclone adds per clone, in memory, over the engine's own: the run program (with the
ask server and the model proxy it now holds in-process), measured while its engine works.

Run: `python bench/clone_memory.py [--clones 3] [--quick]`

Each clone runs the real run program under serve and the fake launcher, on a local fake
GitHub, with the scripted engine (which runs inside the run program, so nothing of an engine
CLI is counted) busy in a `sleep`; the run program's unique and resident memory is read then.
Goal: at most 60 MiB per clone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from shadowclone.config import load_config, set_value
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin.node import LocalNode
from shadowclone_testing.demo import _prepare, _serving
from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.scripted import SCRIPT_VARIABLE, Run, Say, Step, script_json
from shadowclone_testing.timing import record

GOAL_MIB = 60.0
WAIT_S = 120.0
MARK = "shadowclone-memory-bench"


def run_programs(ids: list[str]) -> list[psutil.Process]:
    """The run programs of these clones (not their launcher's keepers, not anyone else's)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if "shadowclone.run" not in command and "shadowclone-run" not in command:
            continue
        try:
            if process.environ().get("SHADOWCLONE_CLONE_ID") in ids:
                found.append(process)
        except psutil.Error:
            continue
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one clone: it works, roughly")
    args = parser.parse_args()
    clones = 1 if args.quick else args.clones
    root = Path(tempfile.mkdtemp(prefix="shadowclone-bench-"))
    root.chmod(0o711)
    os.environ["SHADOWCLONE_HOME"] = str(root)
    pause = 3 if args.quick else 8
    steps: list[Step] = [Run(f"sleep {pause} # {MARK}"), Say("ok")]
    os.environ[SCRIPT_VARIABLE] = json.dumps(script_json(steps))
    with FakeGitHub(root / "github") as github:
        paths, _ = _prepare(root, github, "fake", None)
        set_value(paths, "parallel_clones", str(clones))
        numbers = [
            github.create_issue("you/hello", author="you", title=f"Task {n}") for n in range(clones)
        ]
        with _serving(paths):
            config, resolved = load_config(paths)
            node = LocalNode(config, resolved)
            ids = [node.start(f"you/hello#{number}").id for number in numbers]
            deadline = time.monotonic() + WAIT_S
            while (
                len(
                    sleeping := [
                        p
                        for p in psutil.process_iter(["cmdline"])
                        if MARK in " ".join(p.info["cmdline"] or [])
                    ]
                )
                < clones
            ):
                if time.monotonic() > deadline:
                    raise SystemExit("the clones' engines did not start")
                time.sleep(0.1)
            time.sleep(0.5)  # the engines are at work: the run programs are at their size
            programs = run_programs(ids)
            uss = [p.memory_full_info().uss / 2**20 for p in programs]
            rss = [p.memory_info().rss / 2**20 for p in programs]
            for clone_id in ids:
                folder = RunFolder(paths.clones_dir / clone_id)
                while (seen := folder.record()) is None or seen.state.active:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"clone {clone_id} did not end")
                    time.sleep(0.1)
    del sleeping
    print(f"{len(programs)} run programs, each with its engine at work")
    print(f"unique memory   median {statistics.median(uss):6.1f} MiB  (max {max(uss):.1f})")
    print(f"resident memory median {statistics.median(rss):6.1f} MiB  (max {max(rss):.1f})")
    print(f"goal: at most {GOAL_MIB:.0f} MiB per clone")
    record("run program's unique memory", statistics.median(uss), unit="MiB", at_most=GOAL_MIB)
    return 0


if __name__ == "__main__":
    sys.exit(main())
