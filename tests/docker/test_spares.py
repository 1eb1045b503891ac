"""A clone in a spare: after serve launches a clone, the next one of its kind takes the
container serve started ahead, and the real engine works in it as in any other."""

from __future__ import annotations

import signal

import attrs
import pytest
from shadowclone.node import spares
from shadowclone.node.schemas import State
from shadowclone.plugin import Outcome
from shadowclone_docker_launch.launcher import LABEL_SCOPE, LABEL_SPARE, SPARE_PREFIX
from shadowclone_testing.containers import SETTINGS, World, script, wait_for
from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.serving import ServeProcess, serving


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
            filters={"label": [LABEL_SPARE, f"{LABEL_SCOPE}={scope}"], "status": "running"},
            ignore_removed=True,
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
    left = world.client.containers.list(
        all=True, filters={"label": f"{LABEL_SCOPE}={scope}"}, ignore_removed=True
    )
    assert left == []


def test_a_serve_killed_leaves_spares_that_the_next_one_removes(world: World) -> None:
    """serve killed with a spare waiting: the next serve removes it and keeps a new one for the
    kind, and a serve that stops leaves no container behind."""
    world.use("claude")
    script(world.model, Text("Nothing to change."))
    scope = str(world.paths.clones_dir.absolute())

    def spare_containers() -> set[str]:
        found = world.client.containers.list(
            all=True,
            filters={"label": [LABEL_SPARE, f"{LABEL_SCOPE}={scope}"]},
            ignore_removed=True,
        )
        return {str(c.id) for c in found if str(c.name).startswith(SPARE_PREFIX)}

    serve = ServeProcess.start(world.paths)
    try:
        serve.wait_serving()
        clone_id = world.node.start(f"owner/app#{world.issue('Look around')}").id
        world.ended(clone_id)
        first = wait_for(spare_containers, "a spare after the launch")
        assert serve.end(signal.SIGKILL) == -signal.SIGKILL
        assert spare_containers() == first, "a killed serve removes nothing"

        serve = ServeProcess.start(world.paths)
        serve.wait_serving()
        again = wait_for(lambda: spare_containers() - first, "a spare of the new serve")
        assert spare_containers() == again, "the killed serve's spare is removed"
        assert len(list(spares.waiting(world.paths.clones_dir))) == 1
    finally:
        assert serve.end() == 0, serve.output
    assert spare_containers() == set()
    assert list(spares.waiting(world.paths.clones_dir)) == []
    assert list(spares.given_up(world.paths.clones_dir)) == []
