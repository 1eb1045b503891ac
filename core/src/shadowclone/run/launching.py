"""The run program's process: its variables and logging, then `run_clone` to the end.

Apart from the run program (run/program.py) because only the process's entry point
(run/entry.py) needs it, imported once the head start is under way.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
from collections.abc import Coroutine, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from shadowclone.errors import ShadowcloneError
from shadowclone.node.runfolder import RunFolder
from shadowclone.plugin import contract
from shadowclone.plugin.types import Outcome
from shadowclone.redact import redact_tokens
from shadowclone.run.headstart import HeadStart
from shadowclone.run.identity import SHARED_UMASK, engine_identity
from shadowclone.run.program import CLONE_MARKER, run_clone
from shadowclone.run.progress import ProgressWriter

if TYPE_CHECKING:
    from shadowclone.run.relay import RelayLink

log = logging.getLogger("shadowclone.run.program")
"""The run program's own log, under one name."""

RUN_FOLDER_VARIABLE = contract.RUN_FOLDER_VARIABLE
SECRETS_VARIABLE = contract.SECRETS_VARIABLE
WORKSPACE_VARIABLE = contract.WORKSPACE_VARIABLE
DEFAULT_RUN_FOLDER = Path(contract.CONTAINER_RUN_FOLDER)
DEFAULT_SECRETS_FILE = Path(contract.CONTAINER_SECRETS_FILE)
EGRESS_VARIABLE = contract.EGRESS_VARIABLE
LOGIN_STATE_VARIABLE = contract.LOGIN_STATE_VARIABLE
RELAY_VARIABLE = contract.RELAY_VARIABLE


def scrub_environment(environ: MutableMapping[str, str]) -> None:
    """Drop the run program's own variables from its environment, which the engine inherits:
    they were read at start and are kept in memory."""
    for key in [key for key in environ if key.startswith("SHADOWCLONE_")]:
        if key not in (CLONE_MARKER, "SHADOWCLONE_SCRIPT"):
            del environ[key]


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value) if value else default


def main(head_start: HeadStart | None = None) -> int:
    """The run program, from its entry point (run/headstart.py), which may have begun the
    clone and the target's reads (`head_start`)."""
    try:
        return _main(head_start)
    finally:
        if head_start is not None:
            head_start.close()  # what no step took


def _main(head_start: HeadStart | None) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s"
    )
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # a line per file change
    folder = RunFolder(_env_path(RUN_FOLDER_VARIABLE, DEFAULT_RUN_FOLDER))
    secrets_file = _env_path(SECRETS_VARIABLE, DEFAULT_SECRETS_FILE)
    workspace = os.environ.get(WORKSPACE_VARIABLE)
    egress_proxy = os.environ.get(EGRESS_VARIABLE) or None
    login_state = os.environ.get(LOGIN_STATE_VARIABLE)
    link = None
    if os.environ.get(RELAY_VARIABLE):  # the run folder travels (not on the usual start's way)
        from shadowclone.run.relay import RelayLink

        link = RelayLink.from_environ(os.environ)
    try:
        identity = engine_identity()
    except ShadowcloneError as error:
        ProgressWriter(folder, redact_tokens).final(Outcome.FAILED, None, str(error))
        print(f"shadowclone-run: {error}", file=sys.stderr)
        if link is not None:
            asyncio.run(_relayed(link, folder.path, _nothing()))
        return 2
    scrub_environment(os.environ)
    if identity.isolated:
        os.umask(
            SHARED_UMASK
        )  # what the run program makes in shared folders, the engine may change
    log.info("%s", identity.describe())
    try:
        return asyncio.run(
            _relayed(
                link,
                folder.path,
                run_clone(
                    folder,
                    secrets_file,
                    Path(workspace) if workspace else None,
                    identity=identity,
                    egress_proxy=egress_proxy,
                    login_state=Path(login_state) if login_state else None,
                    own_output_redacted=True,
                    head_start=head_start,
                    relay=link,
                ),
            )
        )
    except ShadowcloneError as error:
        print(f"shadowclone-run: {error}", file=sys.stderr)
        return 2


async def _nothing() -> int:
    return 2


async def _relayed(link: RelayLink | None, folder: Path, work: Coroutine[Any, Any, int]) -> int:
    if link is None:
        return await work
    from shadowclone.run.relay import relayed

    return await relayed(link, folder, work)


def main_exit(head_start: HeadStart | None = None) -> NoReturn:
    """Run `main` and end the process at once: by then every file is written and closed, and
    the interpreter's own teardown (about 60 ms of freeing modules) would only delay the moment
    serve sees the clone end. The exit hooks (logging's flush, the redacted output's last
    lines) still run."""
    code = main(head_start)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
