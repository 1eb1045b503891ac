"""Whole clones on the swarm: `start` on this machine, serve launching them with the swarm
launcher, the real run program and Claude Code in a service on a worker, the fake GitHub and
model server on this machine (reached across the swarm's network). One hears a message mid-run
and opens its pull request; one outlives serve, SIGKILLed, and hears the new serve's message,
launched once."""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shadowclone.config import HOME_VARIABLE, load_config, set_value
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import InboxKind, State
from shadowclone.plugin import Outcome
from shadowclone_testing.containers import (
    IMAGE,
    MESSAGE,
    SETTINGS,
    World,
    a_world,
    docker_client,
    script,
    wait_for,
)
from shadowclone_testing.fakes.models import CallTool, Hang, Shell, Text
from shadowclone_testing.serving import ServeProcess, serving
from shadowclone_testing.swarm import Swarm
from shadowclone_testing.web import free_port

from shadowclone_swarm_launch.settings import SwarmSettings


@pytest.fixture(params=["shared", "sent"])
def swarm_world(
    request: pytest.FixtureRequest,
    sc_swarm: Swarm,
    sc_swarm_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[World]:
    """owner/app on the fake GitHub, set up for Claude Code, and a home whose launcher is the
    swarm's; the fakes listen where the nodes reach this machine. Its run folders are shared
    (the test's folder is at the same path on every node) or sent (the home is in a folder no
    node sees, and serve's relay listens where the nodes reach this machine)."""
    folders = request.param
    root = tmp_path
    if folders == "sent":
        root = Path(tempfile.mkdtemp(prefix="sc-sent-", dir="/var/tmp"))
        request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
        root.chmod(0o755)
    monkeypatch.setenv(HOME_VARIABLE, str(root / "home"))
    here = SwarmSettings(manager=sc_swarm.manager_url).host()
    with a_world(docker_client(), IMAGE, here, root) as world:
        for key, value in (
            ("launcher", '"swarm"'),
            ("launchers.swarm.manager", f'"{sc_swarm.manager_url}"'),
            ("launchers.swarm.registry", f'"{sc_swarm.registry}"'),
            ("launchers.swarm.run_folders", f'"{folders}"'),
            ("launchers.swarm.relay_port", str(free_port())),
            ("spares", "0"),
        ):
            set_value(world.paths, key, value)
        world.use("claude")
        yield world


def sent(world: World) -> bool:
    """Whether the world's run folders travel (`swarm_world`'s "sent")."""
    config, _ = load_config(world.paths)
    return bool(config.launchers["swarm"]["run_folders"] == "sent")


def service_of(swarm: Swarm, clone_id: str) -> Any:
    [service] = swarm.manager.services.list(filters={"name": f"shadowclone-{clone_id}"})
    return service


@pytest.mark.timeout(900)
def test_a_clone_on_a_worker_opens_a_pull_request_hears_a_message_and_an_answer(
    sc_swarm: Swarm, swarm_world: World
) -> None:
    """Each reaches its engine once: the answer as the ask tool's result, the message as a
    turn of its own."""
    world = swarm_world
    number = world.issue("Add a greeting")
    script(
        world.model,
        CallTool(
            "shadowclone_ask",
            "ask",
            {"question": "Hello or hi?", "options": ["hello", "hi"], "recommended": "hi"},
        ),
        Shell("echo hello > GREETING.md"),
        Text("word " * 400, chunk_delay_s=0.2),  # still streaming when the message comes
        Text("Added GREETING.md."),
        on_message=Shell("echo hi swarm >> GREETING.md", text="Adding the line."),
    )
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        question = wait_for(lambda: world.node.get(clone_id).question, "the clone's question")
        world.node.answer(clone_id, question.id, "hello")
        world.working(clone_id, 3)
        [task] = service_of(sc_swarm, clone_id).tasks()
        assert sc_swarm.node(task["NodeID"]).role == "worker"
        world.node.send(clone_id, MESSAGE)
        record = world.ended(clone_id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
    assert world.model.saw_text(MESSAGE), "the message reached the model"
    requests = world.model.model_requests()
    answered = [r for r in requests if any("hello" in t for t in r.tool_results())]
    assert answered and answered[0] is requests[1], "the answer was the ask tool's result"
    folder = RunFolder(world.paths.clones_dir / clone_id)
    inbox, delivered = folder.inbox()[0], folder.deliveries()[0]
    assert [line.id for line in delivered] == [line.id for line in inbox], "each line once"
    assert [line.kind for line in inbox] == [InboxKind.ANSWER, InboxKind.MESSAGE]
    [pull] = world.github.pull_requests("owner/app")
    assert record.pr_url is not None and record.pr_url.endswith(f"/pull/{pull.number}")
    assert pull.pull is not None
    greeting = world.github.read_file("owner/app", pull.pull.head_ref, "GREETING.md")
    assert greeting == "hello\nhi swarm\n"
    left = sc_swarm.manager.services.list(filters={"name": f"shadowclone-{clone_id}"})
    assert left == [] and sc_swarm.manager.secrets.list(filters={"name": clone_id}) == []
    if sent(world):  # everything came over the network; the work stayed on the worker
        assert not (folder.path / "workspace").exists() and folder.inbox_closed_file.exists()
        worker = sc_swarm.client(task["NodeID"])
        assert worker.volumes.get(f"shadowclone-{clone_id}-run") is not None


@pytest.mark.timeout(900)
def test_serve_killed_mid_clone_loses_no_message_and_never_launches_it_again(
    sc_swarm: Swarm, swarm_world: World
) -> None:
    world = swarm_world
    number = world.issue("Survive serve")
    hang = Hang(then=Text("Still thinking."))
    script(world.model, hang, on_message=Text("Heard you; done."))
    serve = ServeProcess.start(world.paths, "--stop-grace", "20")
    try:
        serve.wait_serving()
        clone_id = world.node.start(f"owner/app#{number}").id
        world.working(clone_id, 1)
        assert serve.end(signal.SIGKILL) == -signal.SIGKILL
        [task] = service_of(sc_swarm, clone_id).tasks()
        assert task["Status"]["State"] == "running", "the clone outlives serve"
        serve = ServeProcess.start(world.paths, "--stop-grace", "20")
        serve.wait_serving()
        world.node.send(clone_id, MESSAGE)
        record = world.ended(clone_id)
        hang.release()
    finally:
        serve.end()
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
    assert world.model.saw_text(MESSAGE), "the new serve delivered the message"
    started = [text for text in world.steps(clone_id) if text.startswith("starting claude")]
    assert len(started) == 1, "the clone was never launched again"
