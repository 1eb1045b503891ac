"""`python -m shadowclone.run`: the run program, as the clone image's entry point runs it."""

from __future__ import annotations

import sys

from shadowclone.run.program import main

sys.exit(main())
