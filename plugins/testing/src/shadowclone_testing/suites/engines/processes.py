"""Finding the processes an engine started, to check a stop or a crash leaves none."""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import psutil

from shadowclone_testing.suites.engines.watch import TURN_TIMEOUT_S


def odd_sleep(seconds: int) -> str:
    """A `sleep` command of `seconds` and an odd fraction of one, drawn anew: its command line
    marks its process among all the machine's, never one another test (or another test run
    beside this one) started. Claude Code refuses a bare `sleep N`."""
    return f"sleep {seconds}.{100000 + secrets.randbelow(900000)}"


def processes_running(marker: str) -> list[psutil.Process]:
    """Live (not zombie) processes anywhere on the machine whose command line holds `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or ())
        if marker in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


async def wait_for_process(marker: str, timeout: float = TURN_TIMEOUT_S) -> list[psutil.Process]:
    """Wait until a process whose command line holds `marker` runs."""
    async with asyncio.timeout(timeout):
        while not (found := processes_running(marker)):
            await asyncio.sleep(0.1)
    return found


def engine_processes(before: set[int]) -> list[psutil.Process]:
    """Children of this test process started since `before` was taken, with their descendants."""
    roots = [child for child in psutil.Process().children() if child.pid not in before]
    found = list(roots)
    for root in roots:
        with contextlib.suppress(psutil.NoSuchProcess):  # gone meanwhile: nothing below it
            found += root.children(recursive=True)
    return found
