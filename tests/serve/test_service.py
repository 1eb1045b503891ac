"""The service: the unit and plist texts, and the commands run, against a fake init system
that behaves like systemd and launchd (the real ones are never touched)."""

from __future__ import annotations

import os
import plistlib
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest
from shadowclone.serve.service import (
    LAUNCHD_LABEL,
    SYSTEMD_UNIT,
    CommandResult,
    Service,
    ServiceError,
    launchd_plist,
    run_command,
    serve_command,
    service_environment,
    systemd_unit,
)
from shadowclone_testing.harness import skip_or_fail

UID = 501
COMMAND = ("/opt/shadowclone/bin/shadowclone", "serve")
ENVIRONMENT = {"SHADOWCLONE_HOME": "/home/owner/sc", "PATH": "/usr/local/bin:/usr/bin:/bin"}


@attrs.define
class FakeInit:
    """systemd's user manager and launchd, as far as the service uses them: a unit is read at
    daemon-reload, bootstrap refuses a loaded agent, bootout refuses an unloaded one."""

    unit_file: Path
    plist_file: Path
    calls: list[tuple[str, ...]] = attrs.Factory(list)
    failures: dict[tuple[str, ...], CommandResult] = attrs.Factory(dict)
    loaded_unit: str | None = None
    running_unit: str | None = None
    enabled: bool = False
    agent: dict[str, object] | None = None

    def __call__(self, argv: Sequence[str]) -> CommandResult:
        call = tuple(argv)
        self.calls.append(call)
        if call in self.failures:
            return self.failures[call]
        target = f"gui/{UID}/{LAUNCHD_LABEL}"
        match call:
            case ("systemctl", "--user", "daemon-reload"):
                exists = self.unit_file.exists()
                self.loaded_unit = self.unit_file.read_text() if exists else None
            case ("systemctl", "--user", "enable", "--now", SYSTEMD_UNIT):
                if self.loaded_unit is None:
                    return CommandResult(call, 1, "", f"Unit file {SYSTEMD_UNIT} does not exist.")
                self.enabled = True
                self.running_unit = self.running_unit or self.loaded_unit
            case ("systemctl", "--user", "restart", SYSTEMD_UNIT):
                self.running_unit = self.loaded_unit
            case ("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT):
                self.enabled, self.running_unit = False, None
            case ("systemctl", "--user", "is-active", SYSTEMD_UNIT):
                return (
                    CommandResult(call, 0, "active\n")
                    if self.running_unit
                    else CommandResult(call, 3, "inactive\n")
                )
            case ("systemctl", "--user", "status", "--no-pager", "--lines=10", SYSTEMD_UNIT):
                state = "active (running)" if self.running_unit else "inactive (dead)"
                return CommandResult(call, 0 if self.running_unit else 3, f"Active: {state}\n")
            case ("launchctl", "print", t) if t == target:
                if self.agent is None:
                    return CommandResult(call, 113, "", f'Could not find service "{t}"')
                return CommandResult(call, 0, f"{t} = {{\n\tstate = running\n\tpid = 4242\n}}\n")
            case ("launchctl", "enable", t) if t == target:
                pass
            case ("launchctl", "bootstrap", domain, path) if domain == f"gui/{UID}":
                if self.agent is not None:
                    return CommandResult(call, 5, "", "Bootstrap failed: 5: Input/output error")
                self.agent = plistlib.loads(Path(path).read_bytes())
            case ("launchctl", "bootout", t) if t == target:
                if self.agent is None:
                    return CommandResult(call, 3, "", "Boot-out failed: 3: No such process")
                self.agent = None
            case ("launchctl", "kickstart", t) if t == target:
                pass
            case _:
                raise AssertionError(f"unexpected command {call}")
        return CommandResult(call, 0)


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "owner"
    home.mkdir()
    return home


@pytest.fixture
def init(user_home: Path) -> FakeInit:
    return FakeInit(
        user_home / ".config/systemd/user/shadowclone.service",
        user_home / f"Library/LaunchAgents/{LAUNCHD_LABEL}.plist",
    )


def service(
    home: Path, init: FakeInit, platform: str, command: tuple[str, ...] = COMMAND
) -> Service:
    return Service(
        home=home,
        platform=platform,
        runner=init,
        command=command,
        environment=ENVIRONMENT,
        uid=UID,
    )


# --------------------------------------------------------------------------- systemd


def test_the_systemd_unit() -> None:
    assert systemd_unit(COMMAND, ENVIRONMENT) == (
        "# Written by `shadowclone service install`; `shadowclone service uninstall` removes it.\n"
        "[Unit]\n"
        "Description=shadowclone serve: starts the owner's clones and records how they end\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        "ExecStart=/opt/shadowclone/bin/shadowclone serve\n"
        "Environment=PATH=/usr/local/bin:/usr/bin:/bin\n"
        "Environment=SHADOWCLONE_HOME=/home/owner/sc\n"
        "WorkingDirectory=~\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "# Stopping serve leaves the clones running; the next serve takes them up.\n"
        "KillMode=process\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def test_odd_characters_are_quoted_for_systemd() -> None:
    unit = systemd_unit(
        ("/Users/A Person/bin/$shadow%clone", "-c", 'print("$HOME", "\\n")', "serve"),
        {"SHADOWCLONE_HOME": "/tmp/a b/100%$x\\y"},
    )
    # `$` is expanded in arguments only; `%` everywhere; quotes and backslashes escaped in quotes.
    assert (
        r'ExecStart="/Users/A Person/bin/$shadow%%clone" -c "print(\"$$HOME\", \"\\n\")" serve'
        + "\n"
        in unit
    )
    assert 'Environment="SHADOWCLONE_HOME=/tmp/a b/100%%$x\\\\y"\n' in unit


@pytest.mark.parametrize("character", ["'", '"', "\\"])
def test_an_executable_systemd_cannot_run_is_refused(character: str) -> None:
    with pytest.raises(ServiceError, match="systemd cannot run"):
        systemd_unit((f"/opt/it{character}s/shadowclone", "serve"), {})


def test_a_control_character_cannot_go_into_a_unit() -> None:
    with pytest.raises(ServiceError, match="control character"):
        systemd_unit(COMMAND, {"SHADOWCLONE_HOME": "/tmp/a\nExecStartPre=/bin/evil"})


def test_systemd_itself_reads_the_unit_without_a_complaint(tmp_path: Path) -> None:
    """`systemd-analyze verify` parses the unit as systemd does and checks that ExecStart names an
    executable: a quoting mistake in an odd path shows up as a warning or a missing command."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        skip_or_fail("systemd-analyze is not installed")
        return
    folder = tmp_path / "a dir with 100% $dollars"
    folder.mkdir()
    executable = folder / "shadowclone"
    executable.write_text("#!/bin/sh\nexit 0\n")
    executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    home = str(tmp_path / 'it\'s "home" \\ 100% $HOME')
    for name, command in [
        ("script.service", (str(executable), "serve")),
        (
            "python.service",
            (str(executable), "-c", "import sys; print('$x'); sys.exit(0)", "serve"),
        ),
    ]:
        unit = unit_dir / name
        unit.write_text(systemd_unit(command, {"SHADOWCLONE_HOME": home, "PATH": "/usr/bin"}))
        done = subprocess.run(
            [analyze, "verify", str(unit)], capture_output=True, text=True, check=False, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip() == "", done.stderr

    broken = unit_dir / "broken.service"
    broken.write_text(systemd_unit((str(folder / "missing"), "serve"), {}))
    done = subprocess.run(
        [analyze, "verify", str(broken)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode != 0 and "missing" in done.stderr, "verify must notice a bad command"


def test_install_on_linux(user_home: Path, init: FakeInit) -> None:
    result = service(user_home, init, "linux").install()

    path = user_home / ".config/systemd/user/shadowclone.service"
    assert result.manager == "systemd"
    assert result.path == path
    assert path.read_text() == result.written == systemd_unit(COMMAND, ENVIRONMENT)
    assert init.calls == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", SYSTEMD_UNIT),
        ("systemctl", "--user", "is-active", SYSTEMD_UNIT),
        ("systemctl", "--user", "status", "--no-pager", "--lines=10", SYSTEMD_UNIT),
    ]
    assert [command.argv for command in result.commands] == init.calls
    assert init.enabled and init.running_unit == result.written
    assert result.installed and result.running
    assert result.summary == f"installed at {path}; serve active"
    assert "active (running)" in result.status


def test_install_again_restarts_only_after_a_change(user_home: Path, init: FakeInit) -> None:
    service(user_home, init, "linux").install()
    init.calls.clear()
    service(user_home, init, "linux").install()
    assert ("systemctl", "--user", "restart", SYSTEMD_UNIT) not in init.calls

    init.calls.clear()
    moved = ("/elsewhere/bin/shadowclone", "serve")
    result = service(user_home, init, "linux", command=moved).install()
    assert init.calls[:3] == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", SYSTEMD_UNIT),
        ("systemctl", "--user", "restart", SYSTEMD_UNIT),
    ]
    assert init.running_unit == result.written
    assert "ExecStart=/elsewhere/bin/shadowclone serve" in (init.running_unit or "")


NO_BUS = "Failed to connect to bus: No medium found"


def test_a_missing_user_session_is_explained_and_nothing_stays_installed(
    user_home: Path, init: FakeInit
) -> None:
    reload = ("systemctl", "--user", "daemon-reload")
    init.failures[reload] = CommandResult(reload, 1, "", NO_BUS)
    with pytest.raises(ServiceError) as raised:
        service(user_home, init, "linux").install()
    message = str(raised.value)
    assert message.startswith(f"`systemctl --user daemon-reload` exited 1: {NO_BUS}: ")
    assert "no systemd user session" in message and "loginctl enable-linger" in message
    assert message.endswith(f"; nothing is installed (removed {init.unit_file})")
    assert "\n" not in message
    assert not init.unit_file.exists()
    assert init.calls == [reload, reload]


@pytest.mark.parametrize(
    "failing",
    [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", SYSTEMD_UNIT),
    ],
)
def test_a_failed_first_install_leaves_nothing_enabled(
    user_home: Path, init: FakeInit, failing: tuple[str, ...]
) -> None:
    def enable_then_fail(argv: Sequence[str]) -> CommandResult:
        if tuple(argv) == failing:  # systemd enables the unit, then cannot start it
            init.enabled = failing[2] == "enable"
            return CommandResult(tuple(argv), 1, "", "Job failed")
        if tuple(argv) == ("systemctl", "--user", "disable", SYSTEMD_UNIT):
            init.calls.append(tuple(argv))
            init.enabled = False
            return CommandResult(tuple(argv), 0)
        return init(argv)

    unit = Service(user_home, "linux", enable_then_fail, COMMAND, ENVIRONMENT, UID)
    with pytest.raises(ServiceError, match="Job failed; nothing is installed"):
        unit.install()
    assert not init.unit_file.exists() and not init.enabled
    assert init.loaded_unit is None


def test_a_failed_change_puts_the_previous_unit_back(user_home: Path, init: FakeInit) -> None:
    first = service(user_home, init, "linux").install()
    restart = ("systemctl", "--user", "restart", SYSTEMD_UNIT)
    init.failures[restart] = CommandResult(restart, 1, "", "Job failed")
    with pytest.raises(ServiceError, match="the unit it replaced is back"):
        service(user_home, init, "linux", ("/elsewhere/bin/shadowclone", "serve")).install()
    assert init.unit_file.read_text() == first.written == init.loaded_unit
    assert init.enabled


def test_a_failed_bootstrap_leaves_no_plist(user_home: Path, init: FakeInit) -> None:
    bootstrap = ("launchctl", "bootstrap", f"gui/{UID}", str(init.plist_file))
    init.failures[bootstrap] = CommandResult(bootstrap, 5, "", "Bootstrap failed: 5")
    with pytest.raises(ServiceError, match="Bootstrap failed: 5; nothing is installed"):
        service(user_home, init, "darwin").install()
    assert not init.plist_file.exists()


def test_uninstall_on_linux(user_home: Path, init: FakeInit) -> None:
    service(user_home, init, "linux").install()
    init.calls.clear()
    result = service(user_home, init, "linux").uninstall()
    assert init.calls == [
        ("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT),
        ("systemctl", "--user", "daemon-reload"),
    ]
    assert result.removed and not result.installed and not result.running
    assert not result.path.exists()
    assert init.loaded_unit is None and init.running_unit is None and not init.enabled

    init.calls.clear()
    again = service(user_home, init, "linux").uninstall()
    assert init.calls == []
    assert not again.removed and again.summary.startswith("not installed")


def test_a_failed_disable_still_removes_the_unit_file(user_home: Path, init: FakeInit) -> None:
    service(user_home, init, "linux").install()
    disable = ("systemctl", "--user", "disable", "--now", SYSTEMD_UNIT)
    init.failures[disable] = CommandResult(disable, 1, "", NO_BUS)
    result = service(user_home, init, "linux").uninstall()
    assert result.removed and not init.unit_file.exists()
    assert result.summary.startswith(f"uninstalled: removed {init.unit_file}; but ")
    assert "loginctl enable-linger" in result.summary


def test_status_on_linux(user_home: Path, init: FakeInit) -> None:
    before = service(user_home, init, "linux").status()
    assert not before.installed and not before.running
    assert before.summary == "not installed; serve inactive"
    assert before.written is None

    service(user_home, init, "linux").install()
    after = service(user_home, init, "linux").status()
    assert after.installed and after.running
    assert after.summary == f"installed at {after.path}; serve active"
    assert after.written is None


def test_status_without_systemctl_says_so(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real runner, with no systemctl on PATH: a status, not a crash."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = Service(home=user_home, platform="linux", runner=run_command).status()
    assert not result.installed and not result.running
    assert "systemctl: command not found" in result.summary
    assert "exited 127" in result.status


# --------------------------------------------------------------------------- launchd


def test_the_launchd_plist() -> None:
    home = Path("/Users/owner")
    log_file = home / "Library/Logs/shadowclone/serve.log"
    agent = plistlib.loads(launchd_plist(COMMAND, ENVIRONMENT, home, log_file))
    assert agent == {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(COMMAND),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "AbandonProcessGroup": True,
        "WorkingDirectory": "/Users/owner",
        "StandardOutPath": str(log_file),
        "StandardErrorPath": str(log_file),
        "EnvironmentVariables": ENVIRONMENT,
    }
    bare = plistlib.loads(launchd_plist(COMMAND, {}, home, log_file))
    assert "EnvironmentVariables" not in bare


def test_install_on_macos(user_home: Path, init: FakeInit) -> None:
    result = service(user_home, init, "darwin").install()

    path = user_home / "Library/LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    target = f"gui/{UID}/{LAUNCHD_LABEL}"
    assert result.manager == "launchd"
    assert result.path == path
    assert init.calls == [
        ("launchctl", "print", target),
        ("launchctl", "enable", target),
        ("launchctl", "bootstrap", f"gui/{UID}", str(path)),
        ("launchctl", "print", target),
    ]
    assert init.agent is not None
    assert init.agent["ProgramArguments"] == list(COMMAND)
    assert init.agent["EnvironmentVariables"] == ENVIRONMENT
    assert plistlib.loads(path.read_bytes()) == init.agent
    assert result.written == path.read_text()
    assert (user_home / "Library/Logs/shadowclone").is_dir()
    assert result.installed and result.running
    assert result.summary == f"installed at {path}; serve running"


def test_install_again_on_macos(user_home: Path, init: FakeInit) -> None:
    target = f"gui/{UID}/{LAUNCHD_LABEL}"
    service(user_home, init, "darwin").install()
    init.calls.clear()
    service(user_home, init, "darwin").install()
    assert init.calls == [
        ("launchctl", "print", target),
        ("launchctl", "enable", target),
        ("launchctl", "kickstart", target),
        ("launchctl", "print", target),
    ]

    init.calls.clear()
    moved = ("/elsewhere/bin/shadowclone", "serve")
    service(user_home, init, "darwin", command=moved).install()
    assert init.calls[:4] == [
        ("launchctl", "print", target),
        ("launchctl", "bootout", target),
        ("launchctl", "enable", target),
        ("launchctl", "bootstrap", f"gui/{UID}", str(init.plist_file)),
    ]
    assert init.agent is not None and init.agent["ProgramArguments"] == list(moved)


def test_uninstall_on_macos(user_home: Path, init: FakeInit) -> None:
    target = f"gui/{UID}/{LAUNCHD_LABEL}"
    service(user_home, init, "darwin").install()
    init.calls.clear()
    result = service(user_home, init, "darwin").uninstall()
    assert init.calls == [("launchctl", "print", target), ("launchctl", "bootout", target)]
    assert result.removed and not init.plist_file.exists() and init.agent is None

    init.plist_file.write_bytes(b"left behind")
    init.calls.clear()
    service(user_home, init, "darwin").uninstall()
    assert init.calls == [("launchctl", "print", target)]
    assert not init.plist_file.exists()


def test_status_on_macos(user_home: Path, init: FakeInit) -> None:
    before = service(user_home, init, "darwin").status()
    assert before.summary == "not installed; serve not loaded"
    assert "Could not find service" in before.status
    service(user_home, init, "darwin").install()
    after = service(user_home, init, "darwin").status()
    assert after.running and "state = running" in after.status


# --------------------------------------------------------------------------- what runs, where


def test_another_platform_is_refused(user_home: Path, init: FakeInit) -> None:
    for action in ("install", "uninstall", "status"):
        with pytest.raises(ServiceError, match="no service for win32"):
            getattr(service(user_home, init, "win32"), action)()
    assert init.calls == []


def test_the_defaults_come_from_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHADOWCLONE_HOME", "/srv/shadowclone")
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
    monkeypatch.setenv("SECRET_THING", "not carried")
    made = Service()
    assert made.home == Path.home()
    assert made.platform == sys.platform
    assert made.uid == os.getuid()
    assert made.environment["SHADOWCLONE_HOME"] == "/srv/shadowclone"
    assert made.environment["DOCKER_HOST"] == "unix:///run/user/1000/docker.sock"
    assert "SECRET_THING" not in made.environment
    assert made.command == serve_command()


def test_only_set_variables_are_carried() -> None:
    assert service_environment({"PATH": "/bin", "SHADOWCLONE_HOME": "", "OTHER": "x"}) == {
        "PATH": "/bin"
    }


def test_the_serve_command_runs_this_installation() -> None:
    command = serve_command()
    assert Path(command[0]).is_absolute()
    assert command[-1] == "serve"
    done = subprocess.run(
        [*command[:-1], "--version"], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "shadowclone" in done.stdout


def test_without_a_script_the_interpreter_runs_the_cli(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    command = serve_command(str(python))
    assert command[0] == str(python)
    assert command[-1] == "serve"
    # A bare interpreter beside no script: this test gives it the installation's import path.
    importable = os.pathsep.join(path for path in sys.path if path)
    done = subprocess.run(
        [*command[:-1], "--version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": importable},
    )
    assert done.returncode == 0, done.stderr
    assert "shadowclone" in done.stdout


def test_the_real_runner() -> None:
    done = run_command(
        [
            sys.executable,
            "-c",
            "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)",
        ]
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert not done.ok
    assert done.describe().endswith("exited 3: err")
    missing = run_command(["/nonexistent/systemctl", "--user", "daemon-reload"])
    assert missing.returncode == 127 and "command not found" in missing.stderr
