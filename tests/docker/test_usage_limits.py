"""Whole clones in Docker when the provider says no: a usage limit, short or long, across a
serve killed and started again, after which the engine resumes the same session; and an
overload storm over parallel clones, ridden out with no request answered twice."""

from __future__ import annotations

import hashlib
import json
import signal
import threading

import attrs
import pytest
from shadowclone.config import set_value
from shadowclone.node.schemas import Record, State
from shadowclone.plugin import Outcome
from shadowclone.run.prompt import RESUME_PROMPT
from shadowclone_testing.containers import SETTINGS, WAIT_S, World, script, wait_for
from shadowclone_testing.fakes.models import ApiError, ModelRequest, Reply, Shell, Text, UsageLimit
from shadowclone_testing.serving import ServeProcess, serving


def test_a_usage_limit_schedules_the_clone_across_a_serve_restart_and_its_session_resumes(
    world: World,
) -> None:
    """The login's limit is reached mid-task: the clone is scheduled (its engine ended, the
    login's next clone held in the queue), serve is killed and started again meanwhile, and
    at the reset a new engine process resumes the session: the model sees the earlier
    conversation and the resume prompt, and the clone finishes with its pull request.

    One engine: serve's part is the same for both, each engine's resume in its container
    is tested by the run program's tests (tests/run/test_program_pauses.py), and its resume
    in a new container by the next test, with both; a minute of waiting for the reset each."""
    world.use("claude")
    number, other = world.issue("Limited work"), world.issue("Waits for the limit")
    script(
        world.model,
        Shell("echo before-the-limit > BEFORE.md && echo wrote-before"),
        # Far enough for serve to be killed, started again and looked at before the reset: on
        # a busy machine 15 s passed first, and the clone had resumed and ended.
        UsageLimit(reset_in_s=60),
    )
    resumed: list[ModelRequest] = []

    def after_the_reset(request: ModelRequest) -> Reply | None:
        if request.last_user_text() != RESUME_PROMPT:
            return None
        resumed.append(request)
        return Text("Done after the reset.")

    world.model.rule = after_the_reset
    serve = ServeProcess.start(world.paths, "--stop-grace", "20")
    try:
        serve.wait_serving()
        clone_id = world.node.start(f"owner/app#{number}").id

        def scheduled() -> Record | None:
            record = world.record(clone_id)
            return record if record is not None and record.state is State.SCHEDULED else None

        record = wait_for(scheduled, f"clone {clone_id} to be scheduled")
        assert record.scheduled_until is not None
        waiting = world.node.start(f"owner/app#{other}").id
        assert serve.end(signal.SIGKILL) == -signal.SIGKILL
        serve = ServeProcess.start(world.paths, "--stop-grace", "20")
        serve.wait_serving()
        again = world.record(clone_id)
        assert again is not None
        assert (again.state, again.scheduled_until) == (State.SCHEDULED, record.scheduled_until)
        held = world.node.get(waiting)
        assert held.state is State.QUEUED, held
        assert "usage limit" in (held.waiting_for or ""), held.waiting_for
        ended = world.ended(clone_id)
        world.ended(waiting)
    finally:
        serve.end()
    steps = world.steps(clone_id)
    assert (ended.state, ended.outcome) == (State.DONE, Outcome.DONE), steps
    assert ended.pr_url, steps
    assert any(step.startswith("the usage limit has reset: the engine resumes") for step in steps)
    assert resumed and resumed[0].contains("wrote-before"), "not the same conversation"
    assert resumed[0].contains("Limited work")
    assert "Done after the reset." in steps
    branch = "shadowclone/1-limited-work"
    assert world.github.read_file("owner/app", branch, "BEFORE.md") == "before-the-limit\n"


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_a_long_usage_limit_ends_the_container_and_the_clone_goes_on_at_the_reset(
    world: World, engine: str
) -> None:
    """A reset further away than `long_wait_s`: the clone keeps its engine's session and its
    container ends and is removed; serve, killed and started again meanwhile, keeps it
    scheduled with no container and launches it again at the reset, and a new engine process
    resumes the same session, with the owner's message sent while nothing ran, once."""
    world.use(engine)
    set_value(world.paths, "limits.long_wait_s", "5")
    number = world.issue("Limited work")
    script(
        world.model,
        Shell("echo before-the-limit > BEFORE.md && echo wrote-before"),
        UsageLimit(reset_in_s=40),
    )
    message = "Owner says: carry on once the limit resets."
    resumed: list[ModelRequest] = []

    def after_the_reset(request: ModelRequest) -> Reply | None:
        if request.last_user_text() not in (RESUME_PROMPT, message):
            return None
        resumed.append(request)
        return Text("Done after the reset.")

    world.model.rule = after_the_reset
    serve = ServeProcess.start(world.paths, "--stop-grace", "20")
    try:
        serve.wait_serving()
        clone_id = world.node.start(f"owner/app#{number}").id

        def waiting() -> Record | None:
            record = world.record(clone_id)
            scheduled = record is not None and record.state is State.SCHEDULED
            return record if scheduled and world.container(clone_id) is None else None

        record = wait_for(waiting, f"clone {clone_id} to wait with no container")
        assert record.scheduled_until is not None
        assert serve.end(signal.SIGKILL) == -signal.SIGKILL
        world.node.send(clone_id, message)
        serve = ServeProcess.start(world.paths, "--stop-grace", "20")
        serve.wait_serving()
        again = world.record(clone_id)
        assert again is not None
        assert (again.state, again.scheduled_until) == (State.SCHEDULED, record.scheduled_until)
        assert world.container(clone_id) is None
        ended = world.ended(clone_id)
    finally:
        serve.end()
    steps = world.steps(clone_id)
    assert (ended.state, ended.outcome) == (State.DONE, Outcome.DONE), steps
    assert ended.pr_url, steps
    assert "launched again to resume the engine's session, which a usage limit ended" in steps
    assert resumed and resumed[0].contains("wrote-before"), "not the same conversation"
    assert resumed[0].contains("Limited work") and resumed[0].contains(RESUME_PROMPT)
    carrying = [r for r in world.model.model_requests() if r.contains(message)]
    assert carrying and all(r.user_texts().count(message) == 1 for r in carrying)
    assert steps.count(message) == 1, steps
    branch = "shadowclone/1-limited-work"
    assert world.github.read_file("owner/app", branch, "BEFORE.md") == "before-the-limit\n"


@pytest.mark.timeout(900)  # six clones, bounded by twice a clone's WAIT_S
@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_an_overload_storm_over_four_parallel_clones_is_ridden_out(
    world: World, engine: str
) -> None:
    """Every conversation's first two model requests are answered 529: no clone fails, no
    request is answered twice (none billed twice), serve holds the login's queued clones back
    while the storm lasts and lets them run again after it."""
    world.use(engine)
    set_value(world.paths, "parallel_clones", "4")
    titles = [f"Storm {n}" for n in range(1, 7)]
    numbers = [world.issue(title) for title in titles]
    lock = threading.Lock()
    refused: dict[str, int] = {}
    answered: dict[str, int] = {}

    def storm(request: ModelRequest) -> Reply | None:
        title = next((t for t in titles if request.contains(t)), "")
        body = hashlib.sha256(json.dumps(request.body, sort_keys=True).encode()).hexdigest()
        with lock:
            if refused.get(title, 0) < 2:
                refused[title] = refused.get(title, 0) + 1
                return ApiError("overloaded", status=529)
            if title:
                answered[body] = answered.get(body, 0) + 1
        return Text(f"Done with {title or 'the review'}.")

    world.model.rule = storm
    node = world.node
    settings = attrs.evolve(SETTINGS, overload_restore_s=3.0)
    held: list[dict[str, int]] = []
    with serving(node, settings):
        ids = [node.start(f"owner/app#{number}").id for number in numbers]

        def all_ended() -> bool:
            if throttles := node.throttles():
                held.append(throttles)
            return all(not (world.record(c) or Record(c, State.QUEUED)).state.active for c in ids)

        wait_for(all_ended, "the six clones to end", timeout_s=WAIT_S * 2)
        wait_for(lambda: node.throttles() == {}, "the login to be held back no more")
    records = [world.record(clone_id) for clone_id in ids]
    for clone_id, record in zip(ids, records, strict=True):
        assert record is not None and (record.state, record.outcome) == (
            State.DONE,
            Outcome.DONE,
        ), (record, world.steps(clone_id))
    assert all(count == 2 for count in refused.values()), refused
    assert all(count == 1 for count in answered.values()), "a request was answered twice"
    assert held and min(min(limits.values()) for limits in held) <= 2, held
