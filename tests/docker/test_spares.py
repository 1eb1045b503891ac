"""A clone in a spare: after serve launches a clone, the next one of its kind takes the
container serve started ahead, and the real engine works in it as in any other."""

from __future__ import annotations

import attrs
import pytest
from shadowclone.node import spares
from shadowclone.node.schemas import State
from shadowclone.plugin import Outcome
from shadowclone_docker_launch.launcher import LABEL_SCOPE, LABEL_SPARE
from shadowclone_testing.containers import SETTINGS, World, script, wait_for
from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.serving import serving


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_the_next_clone_of_a_kind_runs_in_the_spare_its_predecessor_left(
    world: World, engine: str
) -> None:
    world.use(engine)
    first, second = world.issue("Add ONE.md"), world.issue("Add TWO.md")
    script(world.model, Shell("echo one > ONE.md"), Text("Added ONE.md."))
    scope = str(world.paths.clones_dir.absolute())

    def spare_waits() -> bool:
        found = world.client.containers.list(
            filters={"label": [LABEL_SPARE, f"{LABEL_SCOPE}={scope}"], "status": "running"}
        )
        return bool(found) and bool(list(spares.waiting(world.paths.clones_dir)))

    with serving(world.node, attrs.evolve(SETTINGS, spare_delay_s=0.0)):
        one = world.node.start(f"owner/app#{first}").id
        container = wait_for(lambda: world.container(one), f"clone {one}'s container")
        assert LABEL_SPARE not in container.labels, "no spare yet: a container of its own"
        records = [world.ended(one)]
        wait_for(spare_waits, "a spare for the next clone")
        script(
            world.model,
            Shell("echo two > TWO.md"),
            Text("word " * 100, chunk_delay_s=0.05),  # still streaming while it is looked at
            Text("Added TWO.md."),
        )
        two = world.node.start(f"owner/app#{second}").id
        container = wait_for(lambda: world.container(two), f"clone {two}'s container")
        assert LABEL_SPARE in container.labels, "the next clone took the spare"
        records.append(world.ended(two))
        world.gone(two)
    for record in records:
        assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), record
    pulls = world.github.pull_requests("owner/app")
    assert len(pulls) == 2
    assert list(spares.waiting(world.paths.clones_dir)) == [], "serve gave its spare up"
    left = world.client.containers.list(all=True, filters={"label": f"{LABEL_SCOPE}={scope}"})
    assert left == []
