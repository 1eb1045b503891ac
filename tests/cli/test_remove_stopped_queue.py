"""A queued clone stopped while serve is down is stopped for every command: `get` says so, and
`rm` and `prune` remove it (its active marker with it), as they remove any ended clone."""

from __future__ import annotations

import json

from shadowclone.config import Paths
from shadowclone_testing.owner import Cli


def start_and_stop(sc_cli: Cli) -> str:
    started = sc_cli("start", "acme/app#1", "--json")
    assert started.code == 0, started.err
    clone_id: str = json.loads(started.out)["id"]
    assert sc_cli("stop", clone_id).code == 0
    assert json.loads(sc_cli("get", clone_id, "--json").out)["state"] == "stopped"
    return clone_id


def test_rm_removes_a_clone_stopped_in_the_queue(
    sc_cli: Cli, sc_home: Paths, sc_ready: object
) -> None:
    clone_id = start_and_stop(sc_cli)
    removed = sc_cli("rm", clone_id)
    assert removed.code == 0, removed.err
    assert not (sc_home.clones_dir / clone_id).exists()
    assert not (sc_home.active_dir / clone_id).exists()
    assert sc_cli("get", clone_id).code != 0
    again = start_and_stop(sc_cli)  # the issue is free again, and so on
    assert sc_cli("rm", again).code == 0


def test_prune_removes_a_clone_stopped_in_the_queue(
    sc_cli: Cli, sc_home: Paths, sc_ready: object
) -> None:
    clone_id = start_and_stop(sc_cli)
    pruned = sc_cli("prune", "--older-than", "0s", "--json")
    assert pruned.code == 0, pruned.err
    assert clone_id in pruned.out
    assert not (sc_home.clones_dir / clone_id).exists()


def test_a_queued_clone_not_stopped_stays(sc_cli: Cli, sc_ready: object) -> None:
    started = sc_cli("start", "acme/app#1", "--json")
    clone_id = json.loads(started.out)["id"]
    refused = sc_cli("rm", clone_id)
    assert refused.code == 1 and f"clone {clone_id} is queued" in refused.err
