"""The scripted engine's tools in the workspace: writing a file and running a command, as the
engine's user where the task says one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from pathlib import Path

from shadowclone.plugin.types import EngineTask

from shadowclone_testing.scripted_steps import ScriptFailed

OUTPUT_CHARS = 4000
"""How much of a command's output (its end) goes into the TextEvent."""


def put_file(task: EngineTask, step: int, target: Path, content: str, append: bool) -> None:
    """Write a file as the engine's user, as a real engine's own tool would."""
    if not task.run_as:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a" if append else "w", encoding="utf-8") as handle:
            handle.write(content)
        return
    done = subprocess.run(
        [
            *task.run_as,
            "/bin/sh",
            "-c",
            f'mkdir -p "$(dirname "$1")" && cat {">>" if append else ">"} "$1"',
            "write",
            str(target),
        ],
        input=content.encode(),
        capture_output=True,
        check=False,
        umask=0o007,
    )
    if done.returncode != 0:
        raise ScriptFailed(
            f"step {step}: cannot write {target.name}: "
            + done.stderr.decode(errors="replace").strip()
        )


async def run_command(task: EngineTask, command: str) -> str:
    """Run `command` in the workspace, in a process group of its own; what it said, to tell the
    owner."""
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *task.run_as,
            "/bin/sh",
            "-c",
            command,
            cwd=task.workspace,
            env={**os.environ, **task.env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            # Its own process group, so a stop ends whatever the command started.
            start_new_session=True,
            umask=0o007 if task.run_as else -1,
        )
    )
    try:
        # Shielded: asyncio's own cleanup of a spawn cancelled midway kills only the shell
        # and then waits for the pipes its children still hold open.
        process = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        await end_group(await spawn)
        raise
    try:
        output, _ = await process.communicate()
    except asyncio.CancelledError:
        await end_group(process)
        raise
    text = output.decode(errors="replace")[-OUTPUT_CHARS:].rstrip()
    said = f"`{command}` exited with code {process.returncode}"
    return f"{said}:\n{text}" if text else f"{said}."


async def end_group(process: asyncio.subprocess.Process) -> None:
    """Kill a command's whole process group and reap the command."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()
