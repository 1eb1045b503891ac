"""`stop` against serve's launch of the same queued clone, in real processes: what `stop`
says is what happens. Worker processes start clones and stop each after a random pause,
while a real `serve` (fake launcher, clones that run until stopped) launches them as fast as
it sees them, so stops land before, during and after launches. A clone `stop` called stopped
(in the queue) never gets `started_at`, never plays a step, and leaves its issue free for a
new clone at once; a clone `stop` called running (or being launched) started, and ends
stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import attrs
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import State
from shadowclone_fake_launch.scripts import (
    SCRIPTS_VARIABLE,
    Play,
    Script,
    ScriptsFile,
    write_scripts,
)
from shadowclone_testing.serving import ServeProcess, make_serve_home, starts, wait_until

WORKERS = 4
TRIALS = 60
"""Trials per worker: each starts a clone on a new issue and stops it."""
MOST_PAUSE_S = 0.3
"""The longest pause between a start and its stop: serve sees a request and launches it in
a few tens of milliseconds, so the pauses spread the stops over before, during and after."""
WAITED_S = 0.02
"""A stop that took longer than this waited for a launch to finish (the fake launcher's takes
tens of milliseconds; a stop alone, a few)."""

WORKER = """
import json, random, sys, time
from shadowclone.errors import Refused
from shadowclone.plugin.node import local_node

seed, first, trials, most_pause = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                   float(sys.argv[4]))
rng = random.Random(seed)
node = local_node()
for number in range(first, first + trials):
    target = f"acme/app#{number}"
    clone = node.start(target)
    time.sleep(rng.uniform(0, most_pause) ** 2 / most_pause)
    began = time.monotonic()
    said = node.stop(clone.id)
    trial = {"id": clone.id, "said": str(said.state), "took": time.monotonic() - began}
    if said.state == "stopped":
        try:
            again = node.start(target)  # its issue is free at once
        except Refused as refused:
            trial["again_refused"] = str(refused)
        else:
            trial["again"] = {"id": again.id, "said": str(node.stop(again.id).state)}
    print(json.dumps(trial), flush=True)
"""


@attrs.frozen
class Said:
    clone_id: str
    said: str


def test_what_stop_says_of_a_clone_serve_is_launching_is_what_happens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    paths, variables = make_serve_home(home, parallel=4)
    start_log = home / "starts.jsonl"
    write_scripts(
        Path(variables[SCRIPTS_VARIABLE]),
        ScriptsFile(default=Script(play=Play.HANG), start_log=str(start_log)),
    )
    env = {**os.environ, **variables}
    pause = str(MOST_PAUSE_S)
    serve = ServeProcess.start(paths, "--stop-grace", "2", env=variables)
    try:
        serve.wait_serving()
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, *map(str, (n, 1 + n * TRIALS, TRIALS)), pause],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(WORKERS)
        ]
        outputs = [worker.communicate(timeout=120) for worker in workers]
        for worker, (_, err) in zip(workers, outputs, strict=True):
            assert worker.returncode == 0, err
        wait_until(lambda: not os.listdir(paths.active_dir), "every clone to end", 60)
    finally:
        assert serve.end() == 0, serve.output

    trials = [json.loads(line) for out, _ in outputs for line in out.splitlines()]
    assert len(trials) == WORKERS * TRIALS
    refused = [t for t in trials if "again_refused" in t]
    assert not refused, f"a clone stopped in the queue kept its issue: {refused[:3]}"
    said = [Said(t["id"], t["said"]) for t in trials]
    said += [Said(t["again"]["id"], t["again"]["said"]) for t in trials if "again" in t]
    played = set(starts(start_log))
    wrong: list[str] = []
    for one in said:
        folder = RunFolder(paths.clones_dir / one.clone_id)
        record = folder.record()
        assert record is not None, one
        lines, _, _ = folder.progress()
        if one.said == "stopped":
            if record.started_at is not None or one.clone_id in played or lines:
                wrong.append(f"{one.clone_id}: stop said stopped in the queue, yet it started")
            if record.state is not State.STOPPED:
                wrong.append(f"{one.clone_id}: stop said stopped, it ended {record.state}")
        else:
            assert one.said in ("running", "queued"), one  # queued: being launched
            # It started (its launcher ran it); stopped at once, it may end before it plays.
            if record.started_at is None:
                wrong.append(f"{one.clone_id}: stop said {one.said}, yet it never started")
            if record.state is not State.STOPPED:
                wrong.append(f"{one.clone_id}: stop said {one.said}, it ended {record.state}")
    counts = Counter(one.said for one in said)
    waited = sum(1 for t in trials if t["said"] == "running" and t["took"] > WAITED_S)
    print(f"stop said, over {len(said)} clones: {dict(counts)}; {waited} waited for a launch")
    assert not wrong, wrong[:5]
    # Both sides of the race were met often, and stops landed inside launches.
    assert counts["stopped"] >= 20, counts
    assert counts["running"] >= 20, counts
    assert waited >= 5, f"only {waited} stops met a launch under way"
