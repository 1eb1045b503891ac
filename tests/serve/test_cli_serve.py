"""The owner's view: `shadowclone start`, a real `shadowclone serve` process with the fake
launcher, `send`, `get --follow`, `stop` and `get`."""

from __future__ import annotations

import json
from collections.abc import Callable

from shadowclone.config import Paths
from shadowclone.node.schemas import State
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.serving import Scripts, ServeProcess, wait_state


def test_a_clone_started_from_the_cli_runs_takes_a_message_and_ends_done(
    sc_home: Paths, sc_scripts: Scripts, sc_cli: Callable[..., CliResult]
) -> None:
    set_up(sc_home)
    sc_scripts.set(
        "acme/app#1", Script(play=Play.ECHO, pr_url="https://github.com/acme/app/pull/2")
    )
    sc_scripts.set("acme/app#2", Script(play=Play.HANG))
    started = sc_cli("start", "acme/app#1", "--json")
    assert started.code == 0, started.err
    clone_id = json.loads(started.out)["id"]
    other = json.loads(sc_cli("start", "acme/app#2", "--json").out)["id"]
    process = ServeProcess.start(sc_home, "--stop-grace", "5")
    try:
        process.wait_serving()
        wait_state(sc_home, clone_id, State.RUNNING)
        sent = sc_cli("send", clone_id, "please add a test")
        assert sent.code == 0, sent.err
        assert sc_cli("send", clone_id, "bye").code == 0
        followed = sc_cli("get", clone_id, "--follow")
        assert followed.code == 0, followed.err
        assert "please add a test" in followed.out
        assert "finished: done  https://github.com/acme/app/pull/2" in followed.out
        wait_state(sc_home, clone_id, State.DONE)
        shown = sc_cli("get", clone_id)
        assert "done" in shown.out.splitlines()[0]
        assert "pull request https://github.com/acme/app/pull/2" in shown.out

        wait_state(sc_home, other, State.RUNNING)
        stopped = sc_cli("stop", other)
        assert stopped.code == 0, stopped.err
        wait_state(sc_home, other, State.STOPPED)
        assert "stopped" in sc_cli("get", other).out.splitlines()[0]
        refused = sc_cli("send", other, "too late")
        assert refused.code == 1
        assert "stopped" in refused.err
    finally:
        code = process.end()
    assert code == 0, process.output
