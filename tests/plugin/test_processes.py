"""The Claude driver's process-tree killer, with real processes that leave the tree."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest
from shadowclone.plugin.processes import ProcessTree

MARKER = "SHADOWCLONE_ENGINE_TREE"


def wait_for_sleeps(token: str, count: int, timeout: float = 10.0) -> list[psutil.Process]:
    """The live `sleep 901.<token>` and `sleep 902.<token>` processes (the tree's, never
    another test's nor another run's), once there are `count`."""
    deadline = time.monotonic() + timeout
    ours = [["sleep", f"901.{token}"], ["sleep", f"902.{token}"]]
    while True:
        found = [
            process
            for process in psutil.process_iter(["cmdline", "status"])
            if process.info["cmdline"] in ours and process.info["status"] != psutil.STATUS_ZOMBIE
        ]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.fixture
def tree_root() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A shell in its own session that starts one child in its group and one that escapes
    into a new session (as Claude Code's Bash tool does); the sleeps' lengths mark them."""
    token = str(100000 + uuid.uuid4().int % 900000)
    script = f"sleep 901.{token} & setsid sleep 902.{token} & wait"
    root = subprocess.Popen(
        ["bash", "-c", script],
        env={**os.environ, MARKER: token},
        start_new_session=True,
    )
    yield root, token
    root.kill()
    root.wait()
    for process in wait_for_sleeps(token, 0, timeout=0):
        process.kill()


def test_signal_ends_the_group_and_what_left_it(
    tree_root: tuple[subprocess.Popen[bytes], str],
) -> None:
    root, token = tree_root
    assert len(wait_for_sleeps(token, 2)) == 2
    tree = ProcessTree(root.pid, (MARKER, token))

    assert tree.signal(signal.SIGKILL) >= 3
    root.wait(timeout=10)

    left = wait_for_sleeps(token, 0, timeout=0)
    _gone, alive = psutil.wait_procs(left, timeout=10)
    assert not [process for process in alive if process.status() != psutil.STATUS_ZOMBIE]


def test_the_marker_finds_processes_orphaned_before_they_were_seen(
    tree_root: tuple[subprocess.Popen[bytes], str],
) -> None:
    root, token = tree_root
    assert len(wait_for_sleeps(token, 2)) == 2
    # The root dies before the tree was ever looked at: its children are re-parented away.
    tree = ProcessTree(root.pid, (MARKER, token))
    os.kill(root.pid, signal.SIGKILL)
    root.wait(timeout=10)
    orphans = wait_for_sleeps(token, 2)
    assert all(process.ppid() != root.pid for process in orphans)

    tree.signal(signal.SIGTERM)

    _gone, alive = psutil.wait_procs(orphans, timeout=10)
    assert not [process for process in alive if process.status() != psutil.STATUS_ZOMBIE]


def test_a_reused_pid_is_not_signalled() -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        tree = ProcessTree(bystander.pid)
        tree._seen[bystander.pid] -= 100  # as if it were another process with the same pid

        assert tree.signal(signal.SIGKILL) == 0
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
