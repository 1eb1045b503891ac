"""Plays one test script as a clone would: progress lines out, deliveries and the stop marker in.

Run by the fake launcher as `python -m shadowclone_fake_launch.player SCRIPT_JSON` with the
variables a clone gets (`SHADOWCLONE_RUN_FOLDER`...). It reads only what a clone may read:
`deliveries.jsonl`, the stop marker and the secrets file. Deliveries are not de-duplicated
here, so a line delivered twice shows as two progress lines.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import FrameType

from shadowclone import files
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    Answer,
    Handoff,
    InboxKind,
    InboxLine,
    ProgressKind,
    ProgressLine,
    Question,
    Resume,
    Step,
    Usage,
    now,
)
from shadowclone.plugin import NetworkMode, Outcome
from watchfiles import Change, watch

from shadowclone_fake_launch.scripts import Play, Script, parse_script_json

QUESTION_ID = "q1"


class Player:
    def __init__(self, folder: RunFolder, script: Script) -> None:
        self.folder = folder
        self.script = script
        self.terminated = False
        self._offset = 0

    def play(self) -> int:
        if self.script.ignore_stop:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, self._on_term)
        plays = {
            Play.FINISH: self.finish,
            Play.NO_FINAL: self.no_final,
            Play.HANG: self.hang,
            Play.ASK: self.ask,
            Play.ECHO: self.echo,
            Play.PROBE: self.probe,
            Play.PHASES: self.phases,
            Play.WAIT: self.wait,
        }
        return plays[self.script.play]()

    # ------------------------------------------------------------------ the scripts

    def finish(self) -> int:
        self.steps()
        if self.script.cost_usd is not None:
            usage = Usage(input_tokens=1000, output_tokens=100, cost_usd=self.script.cost_usd)
            self.write(ProgressLine(Step.ENGINE, ProgressKind.USAGE, "usage", usage=usage))
        self.final(Outcome.DONE, self.script.report)
        return 0

    def phases(self) -> int:
        """Run in three launches, as a review does; each launch notes the network it was
        promised by the handoff it takes."""
        handoff = self.folder.handoff()
        if handoff is not None:
            self.folder.handoff_file.unlink()
        self.note(f"phase on network {handoff.network if handoff else 'open'}")
        if handoff is None:
            self.folder.write_handoff(Handoff(NetworkMode.MODEL_ONLY, Resume.ENGINE))
            return 0
        if handoff.resume is Resume.ENGINE:
            self.folder.write_handoff(Handoff(NetworkMode.OPEN, Resume.SAVE))
            return 0
        self.final(Outcome.DONE, "three phases")
        return 0

    def wait(self) -> int:
        """Exit to wait for a usage limit, as the run program does for a long one; launched
        again, say why and finish."""
        handoff = self.folder.handoff()
        if handoff is None:
            until = now() + timedelta(seconds=self.script.wait_s)
            text = "the usage limit is reached: the clone exits until the reset"
            self.write(ProgressLine(Step.ENGINE, ProgressKind.SCHEDULED, text, until=until))
            self.folder.write_handoff(
                Handoff(NetworkMode.OPEN, Resume.SESSION, at=now(), not_before=until)
            )
            return 0
        self.folder.handoff_file.unlink()
        resumed = self.folder.resume_marker()
        early = resumed is not None and resumed.at >= handoff.at
        went_on = "resumed by the owner" if early else "went on at the reset"
        if handoff.not_before is not None and now() < handoff.not_before and not early:
            went_on = "launched before the reset"
        self.write(ProgressLine(Step.ENGINE, ProgressKind.SCHEDULED, went_on, until=None))
        messages = [line.text for line in self.new_deliveries() if line.kind is InboxKind.MESSAGE]
        if self.stopped():
            self.final(Outcome.STOPPED, f"stopped while waiting; messages {messages}")
            return 0
        self.final(Outcome.DONE, f"{went_on}; messages {messages}")
        return 0

    def no_final(self) -> int:
        self.steps()
        return self.fall_over()

    def fall_over(self) -> int:
        """Some output, then an exit with no final line."""
        for line in self.script.output.splitlines():
            sys.stdout.write(f"{line}\n")
            sys.stdout.flush()
            sys.stderr.write(f"stderr: {line}\n")
            sys.stderr.flush()
        return self.script.exit_code

    def hang(self) -> int:
        self.note("hanging until stopped")
        if self.script.ignore_stop:
            while True:
                time.sleep(3600)
        for _ in self.events():
            if self.stopped():
                self.final(Outcome.STOPPED, "stopped as asked")
                return 0
        return 1

    def ask(self) -> int:
        question = Question(QUESTION_ID, "Which way?", ("left", "right"), "left")
        self.write(
            ProgressLine(Step.ENGINE, ProgressKind.QUESTION, question.text, question=question)
        )
        for _ in self.events():
            for line in self.new_deliveries():
                if line.kind is InboxKind.ANSWER and line.question_id == QUESTION_ID:
                    self.write(
                        ProgressLine(
                            Step.ENGINE,
                            ProgressKind.ANSWER,
                            line.text,
                            answer=Answer(QUESTION_ID, line.text, via=line.via),
                        )
                    )
                    self.final(Outcome.DONE, f"answered {line.text}")
                    return 0
            if self.stopped():
                self.final(Outcome.STOPPED, "stopped while waiting for an answer")
                return 0
        return 1

    def echo(self) -> int:
        self.note("listening")
        for _ in self.events():
            for line in self.new_deliveries():
                self.write(ProgressLine(Step.ENGINE, ProgressKind.MESSAGE, line.text))
                if line.kind is InboxKind.MESSAGE and line.text == self.script.until:
                    self.final(Outcome.DONE, self.script.report)
                    return 0
                if line.kind is InboxKind.MESSAGE and line.text == self.script.crash:
                    return self.fall_over()
            if self.stopped():
                self.final(Outcome.STOPPED, "stopped while listening")
                return 0
        return 1

    def probe(self) -> int:
        """Say what the clone sees: whether it can read the secrets file, whether a write
        to it fails, and its whole environment."""
        path = Path(os.environ.get("SHADOWCLONE_SECRETS_FILE", ""))
        try:
            secrets_text: str | None = path.read_text(encoding="utf-8")
        except OSError as error:
            secrets_text = None
            read_error = str(error)
        else:
            read_error = ""
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("tampered = true\n")
        except OSError as error:
            write_error = str(error)
        else:
            write_error = ""
        report = {
            "secrets_path": str(path),
            "secrets_text": secrets_text,
            "read_error": read_error,
            "write_error": write_error,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
        }
        self.final(Outcome.DONE, json.dumps(report))
        return 0

    # ------------------------------------------------------------------ helpers

    def _on_term(self, _signum: int, _frame: FrameType | None) -> None:
        self.terminated = True

    def write(self, line: ProgressLine) -> None:
        self.folder.append_progress(line)

    def note(self, text: str) -> None:
        self.write(ProgressLine(Step.ENGINE, ProgressKind.NOTE, text))

    def steps(self) -> None:
        for number in range(1, self.script.steps + 1):
            time.sleep(self.script.delay_s)
            self.note(f"step {number} of {self.script.steps}")

    def final(self, outcome: Outcome, report: str) -> None:
        self.write(
            ProgressLine(
                Step.FINISH,
                ProgressKind.FINAL,
                f"clone {outcome}",
                outcome=outcome,
                pr_url=self.script.pr_url,
                report=report,
            )
        )

    def stopped(self) -> bool:
        return self.terminated or self.folder.stop_file.exists()

    def new_deliveries(self) -> list[InboxLine]:
        lines, _, self._offset = self.folder.deliveries(self._offset)
        return lines

    def events(self) -> Iterator[None]:
        """Once at once, then after each change of the deliveries or the stop marker, and at
        least every 200 ms (a SIGTERM is noticed then)."""
        names = {self.folder.deliveries_file.name, self.folder.stop_file.name}

        def wanted(_change: Change, path: str) -> bool:
            return Path(path).name in names

        yield None
        for _changes in watch(
            self.folder.path,
            watch_filter=wanted,
            debounce=50,
            step=5,
            rust_timeout=200,
            yield_on_timeout=True,
            recursive=False,
            raise_interrupt=False,
        ):
            yield None


def main(argv: list[str]) -> int:
    script, start_log = parse_script_json(Path(argv[1]).read_text(encoding="utf-8"))
    folder = RunFolder(Path(os.environ["SHADOWCLONE_RUN_FOLDER"]))
    if start_log:
        files.append_line(
            Path(start_log),
            json.dumps({"clone": folder.id, "pid": os.getpid(), "at": time.time()}).encode(),
        )
    return Player(folder, script).play()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
