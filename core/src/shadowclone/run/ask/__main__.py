"""`python -m shadowclone.run.ask`: the ask server over stdio."""

from __future__ import annotations

if __name__ == "__main__":
    from shadowclone.run.ask.server import main

    raise SystemExit(main())
