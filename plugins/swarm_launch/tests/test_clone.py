"""A whole clone on the swarm: `start` on this machine, serve launching it with the swarm
launcher, the real run program and Claude Code in a service on a worker, the fake GitHub and
model server on this machine (reached across the swarm's network); it hears a message
mid-run and opens its pull request."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from shadowclone.config import HOME_VARIABLE, set_value
from shadowclone.node.schemas import State
from shadowclone.plugin import Outcome
from shadowclone_testing.containers import IMAGE, MESSAGE, SETTINGS, a_world, docker_client, script
from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.serving import serving
from shadowclone_testing.swarm import Swarm

from shadowclone_swarm_launch.settings import SwarmSettings


@pytest.mark.timeout(900)
def test_a_clone_on_a_worker_opens_a_pull_request_and_hears_a_message(
    sc_swarm: Swarm, sc_swarm_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "home"))
    here = SwarmSettings(manager=sc_swarm.manager_url).host()  # this machine, for the nodes
    with a_world(docker_client(), IMAGE, here, tmp_path) as world:
        for key, value in (
            ("launcher", '"swarm"'),
            ("launchers.swarm.manager", f'"{sc_swarm.manager_url}"'),
            ("launchers.swarm.registry", f'"{sc_swarm.registry}"'),
            ("launchers.swarm.run_folders", '"shared"'),
            ("spares", "0"),
        ):
            set_value(world.paths, key, value)
        world.use("claude")
        number = world.issue("Add a greeting")
        script(
            world.model,
            Shell("echo hello > GREETING.md"),
            Text("word " * 400, chunk_delay_s=0.2),  # still streaming when the message comes
            Text("Added GREETING.md."),
            on_message=Shell("echo hi swarm >> GREETING.md", text="Adding the line."),
        )
        with serving(world.node, SETTINGS):
            clone_id = world.node.start(f"owner/app#{number}").id
            world.working(clone_id, 2)
            [service] = sc_swarm.manager.services.list(filters={"name": f"shadowclone-{clone_id}"})
            [task] = cast(Any, service).tasks()
            assert sc_swarm.node(task["NodeID"]).role == "worker"
            world.node.send(clone_id, MESSAGE)
            record = world.ended(clone_id)
        assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
        assert world.model.saw_text(MESSAGE), "the message reached the model"
        [pull] = world.github.pull_requests("owner/app")
        assert record.pr_url is not None and record.pr_url.endswith(f"/pull/{pull.number}")
        assert pull.pull is not None
        greeting = world.github.read_file("owner/app", pull.pull.head_ref, "GREETING.md")
        assert greeting == "hello\nhi swarm\n"
        left = sc_swarm.manager.services.list(filters={"name": f"shadowclone-{clone_id}"})
        assert left == [] and sc_swarm.manager.secrets.list(filters={"name": clone_id}) == []
