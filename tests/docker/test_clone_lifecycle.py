"""Whole clones in Docker, from start to end: `start` on an issue in the fake GitHub, `serve`
with the Docker launcher, and the real Claude Code or Codex inside the clone image against the
scripted fake model server (the fakes listen on the host's address on Docker's bridge only).
A clone opens its pull request, hears a message, asks its owner; it is stopped, killed from
outside, outlives serve; the next clone on its pull request goes on with its session."""

from __future__ import annotations

import signal

import pytest
from shadowclone.contract import CONTAINER_REPO_CACHE
from shadowclone.node.schemas import State
from shadowclone.plugin import Outcome
from shadowclone.run.repocache import COMPLETE, MIRROR
from shadowclone_testing.containers import (
    ANTHROPIC_KEY,
    MESSAGE,
    OAUTH_TOKEN,
    OPENAI_KEY,
    SETTINGS,
    World,
    script,
    wait_for,
)
from shadowclone_testing.fakes.models import CallTool, Hang, Shell, Text
from shadowclone_testing.serving import ServeProcess, serving


@pytest.mark.parametrize(
    ("engine", "login"),
    [("claude", "claude-api-key"), ("claude", "claude-subscription"), ("codex", "openai-api-key")],
)
def test_a_clone_in_a_container_opens_a_pull_request_and_hears_a_message_mid_run(
    world: World, engine: str, login: str
) -> None:
    world.use(engine, login)
    number = world.issue("Add a greeting")
    script(
        world.model,
        Shell("echo hello > GREETING.md && env > ENGINE_ENV.txt"),
        Text("word " * 400, chunk_delay_s=0.2),  # still streaming when the message comes
        Text("Added GREETING.md with a line for docker."),
        on_message=Shell("echo hi docker >> GREETING.md", text="Adding the line."),
    )
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        world.working(clone_id, 2)  # the greeting is written and the model is writing
        assert world.container(clone_id) is not None, "the clone runs in its container"
        world.node.send(clone_id, MESSAGE)
        record = world.ended(clone_id)
        world.gone(clone_id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), record
    assert world.model.saw_text(MESSAGE), "the message reached the model"
    # The workspace borrowed the objects of the repository's cache, kept on the host.
    run_folder = world.node.paths.clones_dir / clone_id
    alternates = run_folder / "workspace/.git/objects/info/alternates"
    assert alternates.read_text().split() == [f"{CONTAINER_REPO_CACHE}/{MIRROR}/objects"]
    cache = world.node.paths.repo_cache("owner/app")
    assert [found.parent.name for found in cache.rglob(COMPLETE)] == [MIRROR]
    [pull] = world.github.pull_requests("owner/app")
    assert record.pr_url is not None and record.pr_url.endswith(f"/pull/{pull.number}")
    assert pull.pull is not None
    greeting = world.github.read_file("owner/app", pull.pull.head_ref, "GREETING.md")
    assert greeting == "hello\nhi docker\n"
    assert f"Closes #{number}" in pull.body
    # The engine held a placeholder; the model proxy gave the provider the real key each time.
    seen = world.github.read_file("owner/app", pull.pull.head_ref, "ENGINE_ENV.txt") or ""
    if login != "claude-subscription":  # Claude Code keeps that token from its tools' env
        assert "shadowclone-placeholder" in seen
    for secret in (ANTHROPIC_KEY, OPENAI_KEY, OAUTH_TOKEN, world.token):
        assert secret not in seen
    requests = world.model.model_requests()
    if login == "claude-api-key":
        assert all(r.headers.get("x-api-key") == ANTHROPIC_KEY for r in requests)
    elif login == "claude-subscription":
        assert all(r.headers.get("authorization") == f"Bearer {OAUTH_TOKEN}" for r in requests)
        assert all("x-api-key" not in r.headers for r in requests)
    else:
        assert all(r.headers.get("authorization") == f"Bearer {OPENAI_KEY}" for r in requests)


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_the_engines_first_request_already_offers_the_ask_tool(world: World, engine: str) -> None:
    """The ask server starts serving beside the engine's own start (its import is not on the
    way to it): the engine's first connection waits for it, so the model's very first reply can
    ask the owner, who answers, and the clone goes on with the answer."""
    world.use(engine)
    number = world.issue("Pick a greeting")
    script(
        world.model,
        CallTool(
            "shadowclone_ask",
            "ask",
            {
                "question": "Formal or friendly?",
                "options": ["formal", "friendly"],
                "recommended": "formal",
            },
        ),
        Shell("echo hi friend > GREETING.md"),
        Text("Wrote a friendly greeting."),
    )
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        question = wait_for(lambda: world.node.get(clone_id).question, "the clone's question")
        assert question.text == "Formal or friendly?"
        world.node.answer(clone_id, question.id, "friendly")
        record = world.ended(clone_id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
    first = world.model.model_requests()[0]
    assert any("shadowclone_ask" in name for name in first.tool_names()), first.tool_names()
    assert any("friendly" in result for result in world.model.model_requests()[1].tool_results())


def test_stop_ends_the_clone_and_its_container(world: World) -> None:
    world.use("claude")
    number = world.issue("Long work")
    hang = Hang()
    script(world.model, Shell("echo wip > WIP.md"), hang)
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        world.working(clone_id, 2)
        world.node.stop(clone_id)
        record = world.ended(clone_id)
        hang.release()
        world.gone(clone_id)
    assert record.state is State.STOPPED, record
    wip = world.github.read_file("owner/app", "shadowclone/1-long-work", "WIP.md")
    assert wip == "wip\n", "it saved its work before it ended"


def test_a_container_killed_from_outside_is_recorded_failed(world: World) -> None:
    world.use("claude")
    number = world.issue("Doomed")
    hang = Hang()
    script(world.model, hang)
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        world.working(clone_id, 1)
        world.container(clone_id).kill()
        record = world.ended(clone_id)
        hang.release()
        world.gone(clone_id)
    assert (record.state, record.exit_code) == (State.FAILED, 137), record
    assert "no final progress line" in record.reason


def test_serve_killed_and_started_again_goes_on_with_the_running_container(
    world: World,
) -> None:
    world.use("claude")
    number = world.issue("Survive serve")
    hang = Hang(then=Text("Still thinking."))
    script(world.model, hang, on_message=Text("Heard you; done."))
    serve = ServeProcess.start(world.paths, "--stop-grace", "20")
    try:
        serve.wait_serving()
        clone_id = world.node.start(f"owner/app#{number}").id
        world.working(clone_id, 1)
        container = world.container(clone_id)
        assert serve.end(signal.SIGKILL) == -signal.SIGKILL
        container.reload()
        assert container.status == "running", "the clone outlives serve"

        serve = ServeProcess.start(world.paths, "--stop-grace", "20")
        serve.wait_serving()
        world.node.send(clone_id, MESSAGE)
        record = world.ended(clone_id)
        hang.release()
        world.gone(clone_id)
    finally:
        serve.end()
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), record
    assert world.model.saw_text(MESSAGE), "the new serve delivered the message"
    started = [text for text in world.steps(clone_id) if text.startswith("starting claude")]
    assert len(started) == 1, "the clone was never launched again"


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_the_next_clone_on_a_pull_request_resumes_the_session_that_made_it(
    world: World, engine: str
) -> None:
    """In containers, with the engine a user of its own: the clone that opened the pull
    request keeps its engine's session, serve gives it to the next clone on the pull request,
    and that clone's engine resumes it (the model sees the earlier tool's output)."""
    world.use(engine)
    number = world.issue("Remember this")
    script(world.model, Shell("echo remember-me > NOTE.md && echo wrote-the-note"), Text("Noted."))
    with serving(world.node, SETTINGS):
        first = world.node.start(f"owner/app#{number}").id
        made = world.ended(first)
        assert made.pr_url is not None, world.steps(first)
        before = len(world.model.model_requests())
        script(world.model, Shell("echo signed >> NOTE.md"), Text("Signed."))
        second = world.node.start(f"owner/app#{made.pr_url.rsplit('/', 1)[1]}").id
        ended = world.ended(second)
    steps = world.steps(second)
    assert (ended.state, ended.outcome) == (State.DONE, Outcome.DONE), steps
    said = f"the engine goes on with the session of clone {first}, which worked on this pull "
    assert f"{said}request" in steps, steps
    resumed = world.model.model_requests()[before]
    assert resumed.contains("wrote-the-note") and resumed.contains("Remember this")
    branch = "shadowclone/1-remember-this"
    assert world.github.read_file("owner/app", branch, "NOTE.md") == "remember-me\nsigned\n"
