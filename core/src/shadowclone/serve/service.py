"""The service: `serve` run by the owner's init system, started at login and restarted when
it fails. A systemd user unit on Linux, a launchd agent on macOS.

The unit and plist texts are pure functions of the command, the environment and the paths. The
commands that load them (`systemctl --user ...`, `launchctl ...`) go through a `Runner`, so tests
check the text and the commands without touching the real init system. `Service(home=...)` picks
the init system by `sys.platform` (or the `platform` given) and offers `install`, `uninstall` and
`status`, each returning a `ServiceResult`.

Stopping the service stops `serve` only: clones keep running and the next `serve` takes them up
. So systemd gets `KillMode=process` and launchd `AbandonProcessGroup`; without them, the
clones that the fake launcher runs as child processes would be killed along with `serve`.

A systemd user service runs while its user has a session. For serve to run after logout and from
boot, the owner enables lingering once (`loginctl enable-linger`); this module leaves that alone,
as it is a setting of the machine, not of shadowclone.
"""

from __future__ import annotations

import logging
import os
import plistlib
import re
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from shadowclone.config.paths import HOME_VARIABLE
from shadowclone.errors import ShadowcloneError

log = logging.getLogger(__name__)

SYSTEMD_UNIT = "shadowclone.service"
LAUNCHD_LABEL = "dev.shadowclone.serve"
CARRIED_VARIABLES = (HOME_VARIABLE, "DOCKER_HOST", "PATH")
"""Variables taken from the installing shell into the service: where shadowclone keeps its files,
which Docker engine to use, and where the tools are (a login's init system has a bare PATH)."""
RESTART_DELAY_S = 5
COMMAND_TIMEOUT_S = 60


class ServiceError(ShadowcloneError):
    """The init system refused or is missing; the message names the command and its answer."""


# --------------------------------------------------------------------------- running commands


@attrs.frozen
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line: the command and the last line it wrote."""
        said = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return f"`{' '.join(self.argv)}` exited {self.returncode}" + (
            f": {said[-1]}" if said else ""
        )


class Runner(Protocol):
    """Runs one command to its end; never raises for a failing or missing command."""

    def __call__(self, argv: Sequence[str]) -> CommandResult: ...


def run_command(argv: Sequence[str]) -> CommandResult:
    """The real runner: a subprocess, its output captured as text."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, check=False, timeout=COMMAND_TIMEOUT_S
        )
    except FileNotFoundError:
        return CommandResult(tuple(argv), 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return CommandResult(tuple(argv), 124, "", f"timed out after {COMMAND_TIMEOUT_S} s")
    return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)


# --------------------------------------------------------------------------- what the service runs


def serve_command(executable: str | None = None) -> tuple[str, ...]:
    """argv for `shadowclone serve` with this interpreter's installation: its `shadowclone`
    script when there is one, else the interpreter itself importing the CLI."""
    python = Path(executable or sys.executable)
    candidates = [python.parent / "shadowclone"]
    if executable is None:
        candidates.insert(0, Path(sysconfig.get_path("scripts")) / "shadowclone")
    for script in candidates:
        if script.is_file() and os.access(script, os.X_OK):
            return (str(script.absolute()), "serve")
    return (
        str(python.absolute()),
        "-c",
        "import sys; from shadowclone.cli import main; sys.exit(main())",
        "serve",
    )


def service_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The carried variables that are set."""
    return {name: environ[name] for name in CARRIED_VARIABLES if environ.get(name)}


def systemd_unit(command: Sequence[str], environment: Mapping[str, str]) -> str:
    """The text of `shadowclone.service`."""
    lines = [
        "# Written by `shadowclone service install`; `shadowclone service uninstall` removes it.",
        "[Unit]",
        "Description=shadowclone serve: starts the owner's clones and records how they end",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + _systemd_command(command),
        *(
            "Environment=" + _systemd_quote(f"{name}={value}", dollar=False)
            for name, value in sorted(environment.items())
        ),
        "WorkingDirectory=~",
        "Restart=on-failure",
        f"RestartSec={RESTART_DELAY_S}",
        "# Stopping serve leaves the clones running; the next serve takes them up.",
        "KillMode=process",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def launchd_plist(
    command: Sequence[str], environment: Mapping[str, str], home: Path, log_file: Path
) -> bytes:
    """The bytes of the launchd agent's plist."""
    agent: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(command),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": RESTART_DELAY_S,
        "AbandonProcessGroup": True,
        "WorkingDirectory": str(home),
        "StandardOutPath": str(log_file),
        "StandardErrorPath": str(log_file),
    }
    if environment:
        agent["EnvironmentVariables"] = dict(sorted(environment.items()))
    return plistlib.dumps(agent, sort_keys=False)


_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_./:=+,@-]+")
_LAUNCHD_RUNNING = re.compile(r"^\s*state = running\s*$", re.MULTILINE)


def _systemd_command(command: Sequence[str]) -> str:
    """ExecStart's value. systemd expands `$` in the arguments but not in the executable, and
    refuses an executable whose path has a quote or a backslash."""
    executable, *arguments = command
    if any(char in executable for char in "\"'\\"):
        raise ServiceError(
            f"systemd cannot run {executable!r}: its path has a quote or a backslash; "
            "install shadowclone in a folder without them"
        )
    words = [_systemd_quote(executable, dollar=False)]
    words += [_systemd_quote(argument, dollar=True) for argument in arguments]
    return " ".join(words)


def _systemd_quote(value: str, *, dollar: bool) -> str:
    """One word as systemd reads it back: specifiers (`%`) doubled, and `$` where it expands."""
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        raise ServiceError(f"{value!r} has a control character; a unit file cannot carry it")
    value = value.replace("%", "%%")
    if dollar:
        value = value.replace("$", "$$")
    if _SYSTEMD_PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------- the service


@attrs.frozen
class ServiceResult:
    """What one call did: the file written or removed, the commands run, and the state after."""

    manager: str
    """`systemd` or `launchd`."""
    path: Path
    installed: bool
    running: bool
    summary: str
    """One line for the owner."""
    written: str | None = None
    """The unit or plist text, when this call wrote the file."""
    removed: bool = False
    commands: tuple[CommandResult, ...] = ()
    status: str = ""
    """The init system's own account of the service."""


def _words(argv: Sequence[str]) -> tuple[str, ...]:
    return tuple(argv)


def _default_uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


@attrs.frozen
class Service:
    """The `serve` service of one user; `home` is that user's home folder."""

    home: Path = attrs.field(factory=Path.home)
    platform: str = attrs.field(factory=lambda: sys.platform)
    runner: Runner = run_command
    command: tuple[str, ...] = attrs.field(factory=serve_command, converter=_words)
    environment: Mapping[str, str] = attrs.field(factory=lambda: service_environment(os.environ))
    uid: int = attrs.field(factory=_default_uid)

    @property
    def manager(self) -> str:
        if self.platform.startswith("linux"):
            return "systemd"
        if self.platform == "darwin":
            return "launchd"
        raise ServiceError(
            f"no service for {self.platform}: systemd (Linux) and launchd (macOS) are supported; "
            "run `shadowclone serve` yourself"
        )

    @property
    def path(self) -> Path:
        if self.manager == "systemd":
            return self.home / ".config" / "systemd" / "user" / SYSTEMD_UNIT
        return self.home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"

    @property
    def log_file(self) -> Path:
        """Where launchd puts serve's output (systemd keeps it in the journal)."""
        return self.home / "Library" / "Logs" / "shadowclone" / "serve.log"

    def text(self) -> str:
        """The unit or plist this service writes."""
        if self.manager == "systemd":
            return systemd_unit(self.command, self.environment)
        return launchd_plist(self.command, self.environment, self.home, self.log_file).decode()

    def install(self) -> ServiceResult:
        """Write the unit or plist, enable it and start serve; again after a change restarts it.

        A failure leaves things as they were: a new unit or plist is removed (and a unit
        enabled on the way disabled again), a changed one is written back."""
        manager, path, text = self.manager, self.path, self.text()
        previous = path.read_text(encoding="utf-8") if path.exists() else None
        calls = _Calls(self.runner)
        try:
            if manager == "systemd":
                _write(path, text)
                calls.check(_systemctl("daemon-reload"))
                calls.check(_systemctl("enable", "--now", SYSTEMD_UNIT))
                if previous is not None and previous != text:
                    calls.check(_systemctl("restart", SYSTEMD_UNIT))
            else:
                self.log_file.parent.mkdir(parents=True, exist_ok=True)
                loaded = calls.run(self._launchctl_print()).ok
                if loaded and previous != text:
                    calls.check(["launchctl", "bootout", self._launchd_target()])
                    loaded = False
                _write(path, text)
                calls.check(["launchctl", "enable", self._launchd_target()])
                if loaded:
                    calls.check(["launchctl", "kickstart", self._launchd_target()])
                else:
                    calls.check(["launchctl", "bootstrap", self._launchd_domain(), str(path)])
        except ServiceError as error:
            raise ServiceError(f"{error}; {self._roll_back(calls, previous)}") from None
        log.info("service installed at %s", path)
        return self._state(calls, written=text)

    def _roll_back(self, calls: _Calls, previous: str | None) -> str:
        """Undo a failed install as far as the init system lets; says what is left."""
        path = self.path
        if previous is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, previous)
        if self.manager == "systemd":
            enabled = any(c.argv[2:3] == ("enable",) for c in calls.done)
            if previous is None and enabled:
                calls.run(_systemctl("disable", SYSTEMD_UNIT))
            calls.run(_systemctl("daemon-reload"))
        return (
            f"nothing is installed (removed {path})"
            if previous is None
            else (f"the unit it replaced is back in {path}")
        )

    def uninstall(self) -> ServiceResult:
        """Stop serve, disable the service and remove its file, whatever the init system says
        (a refusal is reported, the file goes anyway); clones keep running."""
        manager, path = self.manager, self.path
        calls = _Calls(self.runner)
        if not path.exists():
            return ServiceResult(manager, path, False, False, f"not installed (no {path})")
        if manager == "systemd":
            stopped = calls.run(_systemctl("disable", "--now", SYSTEMD_UNIT))
            path.unlink()
            calls.run(_systemctl("daemon-reload"))
        else:
            stopped = calls.run(self._launchctl_print())
            if stopped.ok:
                stopped = calls.run(["launchctl", "bootout", self._launchd_target()])
            else:
                stopped = CommandResult(stopped.argv, 0)  # not loaded: nothing to stop
            path.unlink()
        log.info("service removed from %s", path)
        summary = f"uninstalled: removed {path}"
        if not stopped.ok:
            summary += (
                f"; but {explain(stopped)}: a serve it started may still run "
                "(`shadowclone status` shows it)"
            )
        return ServiceResult(
            manager,
            path,
            installed=False,
            running=False,
            summary=summary,
            removed=True,
            commands=calls.done,
        )

    def status(self) -> ServiceResult:
        """Whether the service is installed and serve is running, with the init system's text.
        Never raises for a missing or silent init system: that goes into the status text."""
        calls = _Calls(self.runner)
        return self._state(calls, written=None)

    def _state(self, calls: _Calls, *, written: str | None) -> ServiceResult:
        manager, path = self.manager, self.path
        installed = path.exists()
        if manager == "systemd":
            active = calls.run(_systemctl("is-active", SYSTEMD_UNIT))
            shown = calls.run(_systemctl("status", "--no-pager", "--lines=10", SYSTEMD_UNIT))
            running = active.ok
            state = active.stdout.strip() or f"state unknown: {explain(active)}"
            status = shown.stdout or shown.describe()
        else:
            shown = calls.run(self._launchctl_print())
            running = shown.ok and bool(_LAUNCHD_RUNNING.search(shown.stdout))
            state = "running" if running else ("loaded, not running" if shown.ok else "not loaded")
            status = shown.stdout if shown.ok else shown.describe()
        where = f"installed at {path}" if installed else "not installed"
        return ServiceResult(
            manager,
            path,
            installed=installed,
            running=running,
            summary=f"{where}; serve {state}",
            written=written,
            commands=calls.done,
            status=status,
        )

    def _launchd_domain(self) -> str:
        return f"gui/{self.uid}"

    def _launchd_target(self) -> str:
        return f"{self._launchd_domain()}/{LAUNCHD_LABEL}"

    def _launchctl_print(self) -> list[str]:
        return ["launchctl", "print", self._launchd_target()]


class _Calls:
    """The commands one operation ran, in order."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._done: list[CommandResult] = []

    @property
    def done(self) -> tuple[CommandResult, ...]:
        return tuple(self._done)

    def run(self, argv: Sequence[str]) -> CommandResult:
        result = self._runner(argv)
        self._done.append(result)
        log.debug("%s", result.describe())
        return result

    def check(self, argv: Sequence[str]) -> CommandResult:
        result = self.run(argv)
        if not result.ok:
            raise ServiceError(explain(result))
        return result


NO_USER_SESSION = (
    "Failed to connect to bus",
    "No medium found",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
)
"""What `systemctl --user` says when this user has no systemd user manager to talk to."""


def explain(result: CommandResult) -> str:
    """The failed command in one line, and what to do when the cause is a missing session."""
    said = result.stdout + result.stderr
    if result.argv[:2] != ("systemctl", "--user") or not any(s in said for s in NO_USER_SESSION):
        return result.describe()
    return (
        f"{result.describe()}: this shell has no systemd user session (as under su, sudo, a "
        "container or a cron job); log in as this user (ssh or a desktop), or have root run "
        "`loginctl enable-linger USER` so the user's systemd runs from boot, then try again; "
        "or run `shadowclone serve` yourself"
    )


def _systemctl(*args: str) -> list[str]:
    return ["systemctl", "--user", *args]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
