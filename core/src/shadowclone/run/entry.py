"""The entry point `shadowclone-run` (and `python -m shadowclone.run`).

Apart from both the head start (run/headstart.py) and the run program (run/program.py,
run/launching.py): the run program takes a `HeadStart`, so the head start's module must not
import the run program back; this module begins the one and only then imports the other.
"""

from __future__ import annotations

import os
from typing import NoReturn

from shadowclone.run.headstart import HeadStart


def main_exit() -> NoReturn:
    """Begin the head start, then import and run the run program with it."""
    head = HeadStart.begin(os.environ)
    from shadowclone.run.launching import main_exit as run_program

    run_program(head)
