"""`python -m shadowclone.run`: the run program, as the clone image's entry point runs it."""

from __future__ import annotations

from shadowclone.run.entry import main_exit

main_exit()
