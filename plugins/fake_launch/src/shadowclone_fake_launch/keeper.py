"""The keeper: a tiny process that runs one fake clone and writes down how it ended.

A restarted serve is not the clone's parent and cannot `wait()` for it, so the keeper does:
it starts the clone in its own process group with its output going to `output.log`, writes
`child.json` (pid and start time), waits, and writes `exit.json`. For its whole life it holds
the lock on `keeper.lock`, whose descriptor the launcher took before starting it: while that
lock is held the clone counts as running, even before `child.json` exists.

Run as a script (`python keeper.py STATE_DIR LOCK_FD`) so that it starts fast; stdlib and
psutil only. It forks once at start so that it is nobody's child.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

import psutil

LAUNCH_FILE = "launch.json"
CHILD_FILE = "child.json"
EXIT_FILE = "exit.json"
OUTPUT_FILE = "output.log"
LOCK_FILE = "keeper.lock"


def write_json(path: Path, value: object) -> None:
    """Atomically, as every file the launcher reads must be."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def exit_code_of(returncode: int) -> int:
    """A signal death as a container reports it: 128 + the signal number."""
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str]) -> int:
    if os.fork() > 0:
        # The launcher waits for this first process only: the keeper goes on as a process of
        # no one's, like a container, and leaves no zombie in the process that launched it.
        os._exit(0)
    state = Path(argv[1])
    lock_fd = int(argv[2])  # held, never used: closing it at exit frees the lock
    launch = json.loads((state / LAUNCH_FILE).read_text(encoding="utf-8"))
    pending: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child is None:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)

    with open(state / OUTPUT_FILE, "ab") as output:
        try:
            child = subprocess.Popen(
                launch["argv"],
                env=launch["env"],
                cwd=launch["cwd"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        except OSError as error:
            output.write(f"the fake launcher could not start the clone: {error}\n".encode())
            write_json(state / EXIT_FILE, {"exit_code": 127, "ended_at": time.time()})
            return 0
    write_json(
        state / CHILD_FILE,
        {"pid": child.pid, "create_time": psutil.Process(child.pid).create_time()},
    )
    for waiting in pending:
        forward(waiting, None)
    returncode = child.wait()
    write_json(state / EXIT_FILE, {"exit_code": exit_code_of(returncode), "ended_at": time.time()})
    os.close(lock_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
