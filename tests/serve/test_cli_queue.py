"""A queued clone never waits in silence: `start`, `get` and `get --follow` say what it waits
for (serve, a slot), and `--follow --exit-status` ends as the clone did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable

from shadowclone.config import Paths, set_value
from shadowclone.node import servelock as lock
from shadowclone.node.schemas import State
from shadowclone.plugin.node import local_node
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.serving import Scripts, ServeProcess, wait_state

Cli = Callable[..., CliResult]
SERVE_DOWN = (
    "waiting for serve, which is not running: start it with `shadowclone serve`, or keep it "
    "running with `shadowclone service install`"
)


def follow_process(*args: str) -> subprocess.Popen[str]:
    """`shadowclone get ... --follow` in a process of its own (it runs until the clone ends)."""
    return subprocess.Popen(
        [sys.executable, "-c", "from shadowclone.cli import entry; entry()", "get", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_start_and_get_say_serve_is_not_running(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    started = sc_cli("start", "acme/app#1")
    clone_id = started.out.split()[1]
    assert started.out.splitlines() == [
        f"queued {clone_id} on acme/app#1 with scripted",
        SERVE_DOWN,
        f"follow it: shadowclone get {clone_id} --follow",
    ]
    assert f"waiting   for {SERVE_DOWN.removeprefix('waiting for ')}" in sc_cli("get", clone_id).out
    assert json.loads(sc_cli("get", clone_id, "--json").out)["waiting_for"].startswith("serve, ")
    sc_cli("stop", clone_id)
    assert json.loads(sc_cli("get", clone_id, "--json").out)["waiting_for"] == ""


def test_follow_on_a_queued_clone_says_why_and_exit_status_tells_a_stop(
    sc_cli: Cli, sc_home: Paths
) -> None:
    set_up(sc_home)
    clone_id = json.loads(sc_cli("start", "acme/app#1", "--json").out)["id"]
    follower = follow_process(clone_id, "--follow", "--exit-status")
    try:
        assert follower.stderr is not None
        assert follower.stderr.readline().rstrip("\n") == SERVE_DOWN
        assert sc_cli("stop", clone_id).code == 0
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 1, err
    assert out.splitlines()[-1] == f"clone {clone_id} is stopped"


def test_get_says_a_queued_clone_waits_for_a_slot_while_serve_runs(
    sc_cli: Cli, sc_home: Paths, sc_scripts: Scripts
) -> None:
    set_up(sc_home)
    set_value(sc_home, "parallel_clones", "1")
    sc_scripts.set("acme/app#1", Script(play=Play.HANG))
    first = json.loads(sc_cli("start", "acme/app#1", "--json").out)["id"]
    second = json.loads(sc_cli("start", "acme/app#2", "--json").out)["id"]
    third = json.loads(sc_cli("start", "acme/app#3", "--json").out)["id"]
    process = ServeProcess.start(sc_home, "--stop-grace", "1")
    try:
        process.wait_serving()
        wait_state(sc_home, first, State.RUNNING)
        assert json.loads(sc_cli("get", second, "--json").out)["waiting_for"] == (
            "a slot: 1 clones running, parallel_clones = 1"
        )
        assert json.loads(sc_cli("get", third, "--json").out)["waiting_for"] == (
            "a slot: 1 clones running, parallel_clones = 1; 1 queued ahead of it"
        )
        assert json.loads(sc_cli("get", first, "--json").out)["waiting_for"] == ""
        for clone_id in (second, third, first):
            assert sc_cli("stop", clone_id).code == 0
        wait_state(sc_home, first, State.STOPPED)
    finally:
        code = process.end()
    assert code == 0, process.output
    assert lock.running(sc_home) is None


def test_follow_json_is_json_lines_and_exit_status_is_0_for_done(
    sc_cli: Cli, sc_home: Paths, sc_scripts: Scripts
) -> None:
    set_up(sc_home)
    sc_scripts.set(
        "acme/app#1", Script(play=Play.FINISH, pr_url="https://github.com/acme/app/pull/2")
    )
    clone_id = json.loads(sc_cli("start", "acme/app#1", "--json").out)["id"]
    follower = follow_process(clone_id, "--follow", "--json", "--exit-status")
    assert follower.stderr is not None
    assert follower.stderr.readline().rstrip("\n") == SERVE_DOWN
    process = ServeProcess.start(sc_home)
    try:
        out, err = follower.communicate(timeout=120)
    finally:
        follower.kill()
        code = process.end()
    assert code == 0, process.output
    assert follower.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines and all(isinstance(line, dict) and "kind" in line for line in lines)
    assert lines[-1]["kind"] == "final" and lines[-1]["pr_url"].endswith("/pull/2")


def test_exit_status_without_follow_is_a_usage_error(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    clone_id = json.loads(sc_cli("start", "acme/app#1", "--json").out)["id"]
    result = sc_cli("get", clone_id, "--exit-status")
    assert result.code == 2
    assert result.err.startswith("shadowclone get: --exit-status: only with --follow")


def test_looking_for_serve_never_makes_a_starting_serve_refuse(sc_home: Paths) -> None:
    """`running` takes the lock for an instant; serves starting meanwhile wait, not refuse."""
    node = local_node(sc_home)
    seen: list[lock.RunningServe | None] = []
    done = threading.Event()

    def look() -> None:
        while not done.is_set():
            seen.append(lock.running(sc_home))

    looker = threading.Thread(target=look)
    looker.start()
    try:
        for _ in range(200):
            with lock.ServeLock(node.paths):
                found = lock.running(sc_home)  # flock: each open file its own, even in one process
                assert found is not None and found.pid == os.getpid()
    finally:
        done.set()
        looker.join()
    assert lock.running(sc_home) is None
    assert os.path.exists(sc_home.serve_lock)
