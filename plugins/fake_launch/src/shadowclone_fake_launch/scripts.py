"""Test scripts the fake launcher can play instead of the run program.

A test knob of this plugin only: when the variable `SHADOWCLONE_FAKE_SCRIPTS` of the process
that runs the launcher (serve) names a scripts file, each clone whose target is listed there (or
every clone, with a `default`) plays that script with `shadowclone_fake_launch.player`. The
scripts file is JSON:

    {"start_log": "/tmp/starts.jsonl",
     "default": {"play": "finish"},
     "targets": {"acme/app#1": {"play": "hang"}}}
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import attrs
import cattrs
from shadowclone.plugin import MalformedFile

SCRIPTS_VARIABLE = "SHADOWCLONE_FAKE_SCRIPTS"


class Play(enum.StrEnum):
    FINISH = "finish"
    """A few progress lines, then a final line `done`, exit 0."""
    NO_FINAL = "no-final"
    """A few progress lines and some output, then exit `exit_code` with no final line."""
    HANG = "hang"
    """Wait until stopped (stop marker or SIGTERM), then a final line `stopped`; with
    `ignore_stop`, ignore both and wait to be killed."""
    ASK = "ask"
    """Ask a question, wait for its answer among the deliveries, then finish `done`."""
    ECHO = "echo"
    """One progress line per delivered inbox line; finish `done` on a message equal to
    `until`, fall over as `no-final` does on a message equal to `crash`, or finish `stopped`
    when stopped."""
    PROBE = "probe"
    """Report what the clone sees (its environment, the secrets file) in its final report."""
    PHASES = "phases"
    """Hand the work on twice, as a review does (model-only, then open), then finish `done`
    reporting the networks each phase was launched on."""
    WAIT = "wait"
    """Exit to wait for a usage limit `wait_s` away, as a clone does for a long one (a
    `scheduled` line, a handoff `resume: session`); launched again, finish `done` (or
    `stopped`, when stopped) reporting why it went on and the messages delivered."""


@attrs.frozen
class Script:
    play: Play = Play.FINISH
    steps: int = 2
    delay_s: float = 0.05
    """Pause before each progress line."""
    exit_code: int = 3
    """The exit code of `no-final`."""
    output: str = "the clone fell over"
    """What `no-final` prints (to stdout and stderr) before it exits."""
    ignore_stop: bool = False
    until: str = "bye"
    crash: str = "crash"
    pr_url: str | None = None
    report: str = "all done"
    cost_usd: float | None = None
    """With `finish`: a usage line reporting this cost comes before the final line."""
    wait_s: float = 3600.0
    """With `wait`: how far away the usage limit's reset is."""


@attrs.frozen
class ScriptsFile:
    targets: dict[str, Script] = attrs.field(factory=dict)
    default: Script | None = None
    start_log: str | None = None
    """Each player appends one line here when it starts, so tests can see no clone ran twice."""

    def for_target(self, key: str) -> Script | None:
        return self.targets.get(key, self.default)


_CONVERTER = cattrs.Converter(forbid_extra_keys=True)


def read_scripts(path: Path) -> ScriptsFile:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return _CONVERTER.structure(raw, ScriptsFile)
    except FileNotFoundError:
        raise MalformedFile(path, "no such scripts file") from None
    except (ValueError, TypeError, cattrs.BaseValidationError) as error:
        raise MalformedFile(path, f"not a scripts file: {error}") from None


def write_scripts(path: Path, scripts: ScriptsFile) -> None:
    from shadowclone.plugin import write_atomic

    write_atomic(path, json.dumps(_CONVERTER.unstructure(scripts), indent=1).encode())


def script_json(script: Script, start_log: str | None) -> str:
    """What the player reads: the script and where to log its start."""
    return json.dumps({"script": _CONVERTER.unstructure(script), "start_log": start_log})


def parse_script_json(text: str) -> tuple[Script, str | None]:
    raw = json.loads(text)
    return _CONVERTER.structure(raw["script"], Script), raw.get("start_log")
