"""The owner's view: `shadowclone start`, a real `shadowclone serve` process with the fake
launcher, `send`, `get --follow`, `stop` and `get`."""

from __future__ import annotations

import json
from collections.abc import Callable

from shadowclone.config import Paths
from shadowclone.node.schemas import State
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.scripts import Play, Script
from shadowclone_testing.serving import Scripts, ServeProcess, wait_state


def test_a_clone_started_from_the_cli_runs_takes_a_message_and_ends_done(
    home: Paths, scripts: Scripts, cli: Callable[..., CliResult]
) -> None:
    set_up(home)
    scripts.set("acme/app#1", Script(play=Play.ECHO, pr_url="https://github.com/acme/app/pull/2"))
    scripts.set("acme/app#2", Script(play=Play.HANG))
    started = cli("start", "acme/app#1", "--json")
    assert started.code == 0, started.err
    clone_id = json.loads(started.out)["id"]
    other = json.loads(cli("start", "acme/app#2", "--json").out)["id"]
    process = ServeProcess.start(home, "--stop-grace", "5")
    try:
        process.wait_serving()
        wait_state(home, clone_id, State.RUNNING)
        sent = cli("send", clone_id, "please add a test")
        assert sent.code == 0, sent.err
        assert cli("send", clone_id, "bye").code == 0
        followed = cli("get", clone_id, "--follow")
        assert followed.code == 0, followed.err
        assert "please add a test" in followed.out
        assert "finished: done  https://github.com/acme/app/pull/2" in followed.out
        wait_state(home, clone_id, State.DONE)
        shown = cli("get", clone_id)
        assert "done" in shown.out.splitlines()[0]
        assert "pull request https://github.com/acme/app/pull/2" in shown.out

        wait_state(home, other, State.RUNNING)
        stopped = cli("stop", other)
        assert stopped.code == 0, stopped.err
        wait_state(home, other, State.STOPPED)
        assert "stopped" in cli("get", other).out.splitlines()[0]
        refused = cli("send", other, "too late")
        assert refused.code == 1
        assert "stopped" in refused.err
    finally:
        code = process.end()
    assert code == 0, process.output
