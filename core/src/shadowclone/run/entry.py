"""The entry point `shadowclone-run` (and `python -m shadowclone.run`).

Apart from both the head start (run/headstart.py) and the run program (run/program.py,
run/launching.py): the run program takes a `HeadStart`, so the head start's module must not
import the run program back; this module begins the one and only then imports the other.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from shadowclone import contract
from shadowclone.errors import ShadowcloneError
from shadowclone.run.headstart import HeadStart

USAGE = f"""\
usage: shadowclone-run

The program inside a clone, which a launcher starts in the clone's container (or process):
the clone's run folder at {contract.CONTAINER_RUN_FOLDER} (or {contract.RUN_FOLDER_VARIABLE}),
the owner's secrets at {contract.CONTAINER_SECRETS_FILE} (or {contract.SECRETS_VARIABLE}).
It takes no arguments. To run a clone: `shadowclone start OWNER/REPO#NUMBER`, with
`shadowclone serve` running.
"""


def refusal(argv: list[str], environ: Mapping[str, str]) -> tuple[int, str] | None:
    """What the entry point answers instead of running, when it is not started as a launcher
    starts it: its usage (0) for --help, or one line (2) for an argument or a missing run
    folder; None to run."""
    if argv and argv[0] in ("-h", "--help"):
        return 0, USAGE
    if argv:
        return 2, f"shadowclone-run: takes no arguments (got {argv[0]!r}); see --help\n"
    folder = Path(environ.get(contract.RUN_FOLDER_VARIABLE) or contract.CONTAINER_RUN_FOLDER)
    if not folder.is_dir():
        return 2, (
            f"shadowclone-run: no run folder at {folder} ({contract.RUN_FOLDER_VARIABLE}): it "
            "runs inside a clone, as a launcher starts it; see --help\n"
        )
    return None


def main_exit() -> NoReturn:
    """Begin the head start, then import and run the run program with it."""
    refused = refusal(sys.argv[1:], os.environ)
    if refused is not None:
        code, text = refused
        (sys.stdout if code == 0 else sys.stderr).write(text)
        raise SystemExit(code)
    if os.environ.get(contract.RELAY_VARIABLE):  # the run folder travels: fetch it first
        from shadowclone.run.relay import begin

        folder = Path(os.environ.get(contract.RUN_FOLDER_VARIABLE) or contract.CONTAINER_RUN_FOLDER)
        try:
            begin(os.environ, folder)
        except ShadowcloneError as error:
            sys.stderr.write(f"shadowclone-run: {error}\n")
            raise SystemExit(2) from None
    head = HeadStart.begin(os.environ)
    from shadowclone.run.launching import main_exit as run_program

    run_program(head)
