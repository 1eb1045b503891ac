"""A dev container's lifecycle commands, run where the Dev Container specification runs them:
in the container, in the workspace folder, once the source is there (`onCreateCommand`,
`updateContentCommand`, `postCreateCommand`, then `postStartCommand`, each key's commands of
the image's features before the configuration's), before the engine starts.

They come from the default branch's configuration, as setup read it, never from the work the
clone is given: they run only when the head checked out is one the owner can trust, and as the
engine's user (what they run, the engine could run). Named commands of one key run in
parallel; a command that fails ends the ones after it, as the specification says; the engine
still starts and is told.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import attrs

from shadowclone import contract
from shadowclone.node.lifecycle import (
    LIFECYCLE_KEYS,
    PREBUILT_KEYS,
    FeatureCommands,
    Lifecycle,
    feature_commands,
)
from shadowclone.node.schemas import Step
from shadowclone.run.state import Basics, Known
from shadowclone.run.targeting import Stopped

COMMAND_TIMEOUT_S = 30 * 60.0
"""How long one lifecycle command may run."""
MAX_LINES = 40
"""At most this many lines of one command's output become progress lines (the rest counted)."""
MAX_LINE_CHARS = 300
COPY_SCRIPT = """
copy() {
    [ -d "$1" ] || return 0
    find "$1" -mindepth 1 -maxdepth 1 -printf '%P\\0' | tar -C "$1" --null -T - -cf - \\
        | tar -C "$2" -xpf - --skip-old-files
}
copy "$1" "$2" && copy "$3" "$4"
"""
"""Copies what is in a folder (not the folder itself: its owner is another) without replacing
a file that is there; arguments: source, target, source, target."""
OUTPUT_GRACE_S = 2.0
"""After a command exits, how long its output is still read: a service it started in the
background may hold the output open for ever."""


class LifecycleCommands:
    """Runs the lifecycle commands of the repository's environment in the clone's workspace."""

    def __init__(self, basics: Basics, known: Known) -> None:
        self.basics = basics
        self.known = known

    async def run(self) -> tuple[str, ...]:
        """Run them all; what the engine should be told (a command that failed), if anything.
        `Stopped` when the owner stops the clone meanwhile."""
        basics = self.basics
        lifecycle = basics.request.lifecycle
        features = read_features()
        if not lifecycle.commands() and not features:
            return ()
        progress = basics.progress
        if not self.known.trusted_head():
            progress.note(
                Step.WORKSPACE,
                "the environment's lifecycle commands do not run: the work checked out is not "
                "the owner's to trust",
            )
            return ()
        try:
            prebuilt = read_prebuilt(lifecycle)
            keys: tuple[str, ...] = LIFECYCLE_KEYS
            if prebuilt is not None:
                await asyncio.to_thread(self._copy_prebuilt, prebuilt)
                keys = tuple(key for key in LIFECYCLE_KEYS if key not in PREBUILT_KEYS)
            return await self._run_all(lifecycle.groups(keys, features))
        finally:
            await asyncio.to_thread(self._leave_out_what_they_made)

    def _copy_prebuilt(self, prebuilt: Prebuilt) -> None:
        """What the prebuild's commands made, into this clone's workspace and the engine's home,
        as the engine, never over a file that is there (the clone's branch may hold it), the
        folders themselves left as they are (the run program's)."""
        basics = self.basics
        identity = basics.identity
        started = time.monotonic()
        folders = [
            str(prebuilt.folder / "workspace"),
            str(basics.workspace_path),
            str(prebuilt.folder / "home"),
            str(basics.engine_area / "home"),
        ]
        try:
            done = subprocess.run(
                identity.wrap(["/bin/sh", "-c", COPY_SCRIPT, "copy", *folders]),
                env=identity.environment(os.environ, basics.engine_area / "home"),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
            said = done.stderr.strip().splitlines() or ["no message"]
            failed = said[-1] if done.returncode != 0 else None
        except subprocess.TimeoutExpired:
            failed = f"not done in {COMMAND_TIMEOUT_S:.0f} s"
        if failed:
            basics.progress.error(
                Step.WORKSPACE, f"copying the prebuilt files failed: {failed[:300]}"
            )
        keys = " and ".join(dict.fromkeys(key for key, _ in prebuilt.ran))
        basics.progress.note(
            Step.WORKSPACE,
            f"{keys}: ran once for the default branch at {prebuilt.commit[:12]} in the prebuilt "
            f"image; {len(prebuilt.made)} path(s) they made copied in "
            f"({time.monotonic() - started:.1f} s)",
        )

    async def _run_all(self, groups: list[list[tuple[str, str]]]) -> tuple[str, ...]:
        """Each group once the one before it ended well, the commands of a group in
        parallel (named commands); what the engine should be told of a failure."""
        progress = self.basics.progress
        for index, group in enumerate(groups):
            for label, line in group:
                progress.note(Step.WORKSPACE, f"{label}: $ {line}")
            ended = await asyncio.gather(*(self._timed(label, line) for label, line in group))
            skipped = sum(len(later) for later in groups[index + 1 :])
            after = f"; {skipped} command(s) after it not run" if skipped else ""
            told = []
            for (label, line), (code, took) in zip(group, ended, strict=True):
                if code == 0:
                    progress.note(Step.WORKSPACE, f"{label}: done in {took:.1f} s")
                    continue
                how = "timed out" if code is None else f"exited {code}"
                progress.error(
                    Step.WORKSPACE,
                    f"{label} {how} after {took:.1f} s{after}: the engine starts anyway",
                )
                told.append(
                    f"The repository's dev container {label} `{line}` {how} in the workspace"
                    f"{after}: what the environment should have installed may be missing."
                )
            if told:
                return tuple(told)
        return ()

    async def _timed(self, label: str, line: str) -> tuple[int | None, float]:
        started = time.monotonic()
        code = await self._run_one(label, line)
        return code, time.monotonic() - started

    def _leave_out_what_they_made(self) -> None:
        """What the commands made that no .gitignore covers (a dependency folder, a build's
        output) is the environment's, not the work's: it is left out of the clone's commits
        and of the engine's."""
        workspace = self.known.workspace
        assert workspace is not None
        listed = workspace.git("ls-files", "--others", "--exclude-standard", "--directory", "-z")
        made = [path for path in listed.split("\0") if path and "\n" not in path]
        if not made:
            return
        patterns = "# made by the environment's lifecycle commands\n"
        patterns += "".join(f"/{_escaped(path)}\n" for path in made)
        own = workspace.git_dir / "info"  # the run program's own git directory: private
        own.mkdir(parents=True, exist_ok=True)
        with (own / "exclude").open("a", encoding="utf-8") as out:
            out.write(patterns)
        # The engine's repository is the engine's: its .git may hold links anywhere, so its
        # exclude file is appended to as the engine, never as the run program.
        identity = workspace.identity
        subprocess.run(
            identity.wrap(["/bin/sh", "-c", "mkdir -p .git/info && cat >> .git/info/exclude"]),
            input=patterns,
            text=True,
            cwd=workspace.path,
            env=identity.environment(os.environ, self.basics.engine_area / "home"),
            capture_output=True,
            timeout=60,
            check=False,
        )
        shown = ", ".join(made[:10]) + (f" and {len(made) - 10} more" if len(made) > 10 else "")
        self.basics.progress.note(
            Step.WORKSPACE,
            f"left out of the clone's commits (made by the lifecycle commands, in no "
            f".gitignore): {shown}",
        )

    async def _run_one(self, key: str, line: str) -> int | None:
        """The command's exit code, None when it timed out; its output as progress lines."""
        basics = self.basics
        identity = basics.identity
        base = identity.environment(os.environ, basics.engine_area / "home")
        remote = basics.request.lifecycle.environment(base)  # never the engine's home
        env = {**base, **remote, "HOME": base["HOME"], "TMPDIR": base["TMPDIR"]}
        process = await asyncio.create_subprocess_exec(
            *identity.wrap(["/bin/sh", "-c", line]),
            cwd=basics.workspace_path,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        reader = asyncio.create_task(self._relay(key, process))
        exited = asyncio.create_task(process.wait())
        stopped = asyncio.create_task(basics.stop.wait())
        try:
            done, _ = await asyncio.wait(
                {exited, stopped}, timeout=COMMAND_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
            )
            if exited not in done:
                _kill(process)
                await process.wait()
                if stopped in done:
                    raise Stopped
                return None
            return process.returncode
        finally:
            stopped.cancel()
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(reader, OUTPUT_GRACE_S)

    async def _relay(self, key: str, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        shown = more = 0
        while raw := await process.stdout.readline():
            text = raw.decode("utf-8", "replace").rstrip()
            if not text:
                continue
            if shown < MAX_LINES:
                self.basics.progress.note(Step.WORKSPACE, f"{key}: {text[:MAX_LINE_CHARS]}")
                shown += 1
            else:
                more += 1
        if more:
            self.basics.progress.note(Step.WORKSPACE, f"{key}: {more} more line(s) not shown")


@attrs.frozen
class Prebuilt:
    """A prebuilt image's files (run/prebuild.py): what its commands made, and from what."""

    folder: Path
    commit: str
    ran: tuple[tuple[str, str], ...]
    made: tuple[str, ...]


def read_prebuilt(lifecycle: Lifecycle) -> Prebuilt | None:
    """The image's prebuilt files, if it has some made by the commands `lifecycle` holds."""
    folder = Path(os.environ.get(contract.PREBUILT_VARIABLE, contract.CONTAINER_PREBUILT))
    try:
        info = json.loads((folder / contract.PREBUILT_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ran = tuple(lifecycle.prebuilt())
    if not isinstance(info, dict) or info.get("commands") != [line for _, line in ran]:
        return None
    made = info.get("made")
    return Prebuilt(
        folder,
        str(info.get("commit", "")),
        ran,
        tuple(str(path) for path in made) if isinstance(made, list) else (),
    )


def read_features() -> list[FeatureCommands]:
    """The lifecycle commands of the image's features (`contract.FEATURES_LIFECYCLE`, which
    the image's build wrote from its `devcontainer.metadata` label); none when it has none."""
    path = os.environ.get(contract.FEATURES_LIFECYCLE_VARIABLE, contract.FEATURES_LIFECYCLE)
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return feature_commands(entries)[0]


def _escaped(path: str) -> str:
    """`path` as a gitignore pattern that matches only itself."""
    return "".join(f"\\{char}" if char in "\\*?[!# " else char for char in path)


def _kill(process: asyncio.subprocess.Process) -> None:
    """The command and everything it started (its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
