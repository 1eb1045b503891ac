"""`shadowclone status` through the CLI: what blocks clones is a FAIL and exit 1; with serve
running, a setup and a private secrets file, clones can start (exit 0). NO_COLOR honoured."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from shadowclone.config import Paths, set_value
from shadowclone_testing.harness import CliResult, in_terminal, run_shadowclone, set_up
from shadowclone_testing.serving import Scripts, ServeProcess

Cli = Callable[..., CliResult]


def by_name(result: CliResult) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in json.loads(result.out)["checks"]}


def private_secrets(home: Paths, mode: int = 0o600) -> None:
    home.secrets_file.parent.mkdir(parents=True, exist_ok=True)
    home.secrets_file.write_text("")
    home.secrets_file.chmod(mode)


def test_a_bare_home_says_what_blocks_clones(sc_cli: Cli, sc_home: Paths) -> None:
    result = sc_cli("status", "--json")
    assert result.code == 1
    assert json.loads(result.out)["ok"] is False
    checks = by_name(result)
    for name in ("serve", "secrets", "setups"):
        assert checks[name]["ok"] is False and checks[name]["blocks"] is True, name
    assert checks["launcher fake"]["ok"] is True
    shown = sc_cli("status")
    assert shown.code == 1
    assert "FAIL serve                not running: start it with `shadowclone serve`" in shown.out
    assert shown.out.splitlines()[-1] == "clones cannot start: see FAIL above"


def test_with_serve_a_setup_and_private_secrets_clones_can_start(
    sc_cli: Cli, sc_home: Paths, sc_scripts: Scripts
) -> None:
    set_up(sc_home)
    private_secrets(sc_home)
    process = ServeProcess.start(sc_home)
    try:
        process.wait_serving()
        result = run_shadowclone("status")
        checks = by_name(run_shadowclone("status", "--json"))
    finally:
        assert process.end() == 0, process.output
    assert result.code == 0, result.out
    assert f"running (pid {process.pid}, since " in str(checks["serve"]["detail"])
    assert checks["setup acme/app"]["ok"] is True
    assert checks["secrets"]["detail"] == f"{sc_home.secrets_file}, private (mode 600)"
    assert checks["clones"]["detail"] == (
        "0 running, 0 waiting, 0 scheduled, 0 preparing, 0 queued; parallel_clones = 2"
    )
    assert result.out.splitlines()[-1] == "clones can start"


def test_readable_secrets_and_the_daily_limit_block(sc_cli: Cli, sc_home: Paths) -> None:
    set_up(sc_home)
    private_secrets(sc_home, 0o644)
    set_value(sc_home, "daily_clones", "1")
    assert sc_cli("start", "acme/app#1").code == 0
    checks = by_name(sc_cli("status", "--json"))
    assert "others can read it (mode 644); run chmod 600" in str(checks["secrets"]["detail"])
    assert checks["today"] == {
        "name": "today",
        "ok": False,
        "detail": "1 of daily_clones = 1 started in the last 24 hours",
        "blocks": True,
    }
    assert str(checks["queue"]["detail"]).endswith(
        "waits for serve, which is not running: "
        "start it with `shadowclone serve`, or keep it running with `shadowclone service install`"
    )


def test_status_is_coloured_in_a_terminal_unless_no_color(sc_home: Paths) -> None:
    env = {"SHADOWCLONE_HOME": os.environ["SHADOWCLONE_HOME"], "TERM": "xterm-256color"}
    coloured = in_terminal("status", env=env, code=1)
    assert "\x1b[" in coloured and "FAIL" in coloured
    plain = in_terminal("status", env={**env, "NO_COLOR": "1"}, code=1)
    assert "\x1b[" not in plain and "FAIL serve" in plain
