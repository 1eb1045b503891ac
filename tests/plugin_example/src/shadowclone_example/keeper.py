"""Runs one clone and writes its exit code beside its output, so that a launcher started later
still learns how the clone ended: `python -m shadowclone_example.keeper FOLDER COMMAND...`."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType


def main() -> None:
    folder = Path(sys.argv[1])
    with (folder / "output").open("wb") as output:
        clone = subprocess.Popen(sys.argv[2:], stdout=output, stderr=subprocess.STDOUT)

    def hand_on(signum: int, frame: FrameType | None) -> None:
        clone.send_signal(signum)

    signal.signal(signal.SIGTERM, hand_on)
    code = clone.wait()
    written = folder / "exit.new"
    written.write_text(f"{code}\n", encoding="utf-8")
    written.replace(folder / "exit")


if __name__ == "__main__":
    main()
