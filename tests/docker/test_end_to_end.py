"""Whole clones in Docker: `start` on an issue in the fake GitHub, `serve` with the Docker
launcher, and the real Claude Code or Codex inside the clone image against the scripted fake
model server. The fakes listen on the host's address on Docker's bridge only."""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import threading
from pathlib import Path
from typing import Any

import attrs
import docker
import docker.errors
import pytest
from shadowclone.config import (
    load_config,
    set_value,
)
from shadowclone.environment.declared import cache_volumes
from shadowclone.node.schemas import Record, State
from shadowclone.plugin import Outcome, load_registry
from shadowclone.run.prompt import RESUME_PROMPT
from shadowclone.setup import setup_repository
from shadowclone_docker_launch.commands import build_environment, describe
from shadowclone_docker_launch.launcher import LABEL_SCOPE, SPARE_PREFIX
from shadowclone_testing.containers import (
    ANTHROPIC_KEY,
    MESSAGE,
    OAUTH_TOKEN,
    OPENAI_KEY,
    SETTINGS,
    WAIT_S,
    World,
    script,
    wait_for,
)
from shadowclone_testing.fakes.chatgpt import TOKEN_PATH, FakeChatgptLogin
from shadowclone_testing.fakes.models import (
    ApiError,
    CallTool,
    Hang,
    ModelRequest,
    Reply,
    Shell,
    Text,
    UsageLimit,
)
from shadowclone_testing.harness import set_up
from shadowclone_testing.serving import ServeProcess, serving


def running_clones(world: World) -> list[Any]:
    """The running containers of this test's clones (its clones folder's label): never another
    test's, nor one an earlier test left; spares and model proxies left out."""
    scope = f"{LABEL_SCOPE}={world.paths.clones_dir.absolute()}"
    found = world.client.containers.list(filters={"label": scope}, ignore_removed=True)
    names = [(container, container.name or "") for container in found]
    return [
        c for c, name in names if not name.endswith("-proxy") and not name.startswith(SPARE_PREFIX)
    ]


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
def test_a_usage_limit_schedules_the_clone_across_a_serve_restart_and_its_session_resumes(
    world: World, engine: str
) -> None:
    """The login's limit is reached mid-task: the clone is scheduled (its engine ended, the
    login's next clone held in the queue), serve is killed and started again meanwhile, and
    at the reset a new engine process resumes the session: the model sees the earlier
    conversation and the resume prompt, and the clone finishes with its pull request."""
    world.use(engine)
    number, other = world.issue("Limited work"), world.issue("Waits for the limit")
    script(
        world.model,
        Shell("echo before-the-limit > BEFORE.md && echo wrote-before"),
        UsageLimit(reset_in_s=15),
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


ENVIRONMENT_FILES = {
    ".devcontainer/devcontainer.json": json.dumps(
        {
            "build": {"dockerfile": "Dockerfile", "args": {"GREETING": "from-the-dockerfile"}},
            "postCreateCommand": "jq --version > /etc/jq-version",
            # As written: nothing expanded or unescaped on the way into the image.
            "containerEnv": {"ENV_MARK": 'declared-variable $HOME "quoted" back\\slash'},
        }
    ),
    ".devcontainer/Dockerfile": (
        "FROM shadowclone-base:bookworm\nARG GREETING\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends jq"
        " && rm -rf /var/lib/apt/lists/*\n"
        "RUN echo $GREETING > /etc/greeting\n"
    ),
}


JQ_CHECK = "jq -e .ok status.json || { echo status.json is not ok; exit 1; }"
"""The repository's check, which needs the toolchain its environment installs."""
JQ_FIX = """echo '{"ok": true}' > status.json && echo status-fixed"""


def test_a_repository_environment_is_built_once_and_its_clones_run_in_it(world: World) -> None:
    """A devcontainer whose Dockerfile installs a Debian package: setup (its check clone in
    Docker) keeps the declaration; serve builds the image before the first clone's launch
    (the clone shows `preparing` with the build's steps), and the clone runs the real engine
    in it: the package, the build argument, the setup command's file and the declared
    variable are all there. The repository's check, which runs that package, fails on the
    first turn's work, goes back to the engine once and passes after its fix. The next clone
    and `env build` find the image: no build."""
    world.use("claude")
    files = {**ENVIRONMENT_FILES, "status.json": '{"ok": false}\n'}
    world.github.commit("owner/app", "main", files, author="owner")
    # This machine's extra certificate authorities, as scripts/build-image trusts them.
    authorities = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    set_value(world.paths, "environment.ca_certs", json.dumps([str(a) for a in authorities]))
    config, _ = load_config(world.paths)
    summary = setup_repository(
        config,
        world.paths,
        load_registry(),
        "owner/app",
        engine="claude",
        check_commands=(JQ_CHECK,),
        build=False,  # serve builds it
    )
    assert summary.ok, summary
    tag = describe("owner/app")["tag"]
    with contextlib.suppress(docker.errors.ImageNotFound):  # left by an earlier run
        world.client.images.remove(tag, force=True)
    assert describe("owner/app")["built"] is False
    first, second = world.issue("Use the toolchain"), world.issue("Use it again")
    probe = 'jq --version; cat /etc/jq-version /etc/greeting; printf "mark=%s\\n" "$ENV_MARK"'
    script(world.model, Shell(probe), Text("Done."))
    world.model.rule = lambda request: (
        (Text("Fixed: status.json is ok.") if request.contains("status-fixed") else Shell(JQ_FIX))
        if request.contains("status.json is not ok")
        else None
    )
    seen: set[State] = set()
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{first}").id

        def ended() -> Record | None:
            record = world.record(clone_id)
            if record is not None:
                seen.add(record.state)
            return record if record is not None and not record.state.active else None

        record = wait_for(ended, "the first clone, its environment built", timeout_s=1200)
        script(world.model, Text("Done again."))
        again = world.ended(world.node.start(f"owner/app#{second}").id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), world.steps(clone_id)
    assert State.PREPARING in seen
    assert (record.image, again.image) == (tag, tag)
    building = [line for line in world.steps(clone_id) if line.startswith("building the env")]
    assert building and f"built {tag}" in world.steps(clone_id)
    steps = [line for line in world.steps(clone_id) if line.startswith(("#", "Step "))]
    assert any("apt-get" in line for line in steps), world.steps(clone_id)
    assert not [line for line in world.steps(again.id) if line.startswith("building")]
    assert describe("owner/app")["built"] is True
    assert build_environment("owner/app", "host") == tag  # found: the same image
    texts = world.steps(clone_id)
    toolchain = [t.split(":")[1].strip() for t in texts if t.startswith("toolchain:")]
    assert toolchain == ["failed", "passed"], texts
    told = [r for r in world.model.model_requests() if r.contains("status.json is not ok")]
    assert told and told[0].contains("Done."), "the failing check did not go back to the engine"
    assert "review toolchain: passed" in (record.report or "")
    assert (
        world.github.read_file("owner/app", f"shadowclone/{first}-use-the-toolchain", "status.json")
        == '{"ok": true}\n'
    )

    declared = 'mark=declared-variable $HOME "quoted" back\\slash'
    results = [r for r in world.model.model_requests() if r.contains(declared)]
    assert results, "the declared variable did not reach the engine's shell"
    assert results[0].contains("from-the-dockerfile") and results[0].contains("jq-1.")


def test_a_repositorys_package_caches_outlive_its_clones(world: World) -> None:
    """What one clone's engine leaves in its package cache (npm's, as the image points it), the
    next clone of the repository finds; the cache is the engine's to write."""
    world.use("claude")
    first, second = world.issue("Fill the cache"), world.issue("Read the cache")
    volumes = cache_volumes("owner/app", ())
    try:
        with serving(world.node, SETTINGS):
            fill = 'echo kept-across-clones > "$npm_config_cache/probe" && echo filled'
            script(world.model, Shell(fill), Text("Filled."))
            filled = world.ended(world.node.start(f"owner/app#{first}").id)
            read = 'cat "$npm_config_cache/probe"; echo "owner=$(stat -c %U "$PIP_CACHE_DIR")"'
            script(world.model, Shell(read), Text("Read."))
            clone_id = world.node.start(f"owner/app#{second}").id
            found = world.ended(clone_id)
        assert (filled.outcome, found.outcome) == (Outcome.DONE, Outcome.DONE), found
        seen = [r for r in world.model.model_requests() if r.contains("owner=")]
        assert seen and seen[0].contains("kept-across-clones"), world.steps(clone_id)
        assert seen[0].contains("owner=engine")
        for volume in volumes:  # one per default cache, kept after the clones
            world.client.volumes.get(volume)
    finally:
        for volume in volumes:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                world.client.volumes.get(volume).remove(force=True)


def test_a_review_of_a_strangers_pull_request_runs_the_engine_with_the_network_off(
    world: World,
) -> None:
    world.use("claude")
    stranger = world.github.add_user("stranger", name="A Stranger")
    assert stranger
    world.github.grant("owner/app", "stranger", "read")
    number = world.github.create_pull_request(
        "owner/app",
        author="stranger",
        branch="helpful",
        title="Helpful change",
        files={"app.py": "print('hi')\n"},
        fork=True,
    )
    networks: list[str] = []

    def note_network(request: ModelRequest) -> Reply | None:
        # Asked while the engine's request is open: where does the engine's container sit?
        for container in running_clones(world):
            networks.append(container.attrs["HostConfig"]["NetworkMode"])
        return None

    world.model.rule = note_network
    world.model.add(Text("Looks fine, but it needs tests."))
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        record = world.ended(clone_id)
        world.gone(clone_id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), record
    assert networks and set(networks) == {"none"}, "the engine ran with no network"
    reviews = world.github.issue("owner/app", number).reviews
    assert "Looks fine, but it needs tests." in reviews[-1].body, "the review was posted"
    assert record.handoffs == 2, "fetched, reviewed off the network, posted"


def test_codex_on_a_chatgpt_plan_refreshes_through_the_proxy_and_the_next_clone_goes_on(
    world: World,
) -> None:
    """Two clones on one ChatGPT plan login, the second on a stranger's issue (network-off, so
    its refresh goes through the egress proxy). Each finds the access token expired; the proxy
    refreshes it once, keeps the rotated refresh token in the login's state folder, and the
    second clone refreshes from that one, never from the spent token the owner pasted."""
    login = FakeChatgptLogin()
    world.model.login = login
    world.use("codex")
    set_value(world.paths, "providers.codex.login", '"chatgpt-plan"')
    set_value(
        world.paths, "providers.codex.token_url", f'"{world.model.url_for(world.host)}{TOKEN_PATH}"'
    )
    set_up(world.paths, "owner/app", engine="codex", login="chatgpt-plan", visibility="private")
    pasted = login.auth_json()
    with world.paths.secrets_file.open("a") as secrets:
        secrets.write(f"codex_auth_json = '''\n{pasted}\n'''\n")
    world.github.add_user("stranger", name="A Stranger")
    world.github.grant("owner/app", "stranger", "read")
    own = world.issue("Add a greeting")
    strangers = world.github.create_issue("owner/app", author="stranger", title="Add a farewell")
    networks: list[str] = []

    def expire_then_note(request: ModelRequest) -> Reply | None:
        for container in running_clones(world):
            networks.append(container.attrs["HostConfig"]["NetworkMode"])
        login.expire()  # the next request of this clone finds its access token expired
        return None

    records = []
    for number, file in ((own, "GREETING.md"), (strangers, "FAREWELL.md")):
        networks.clear()
        world.model.rule = expire_then_note
        world.model.add(
            Shell(f'echo hello > {file} && cat "$CODEX_HOME/auth.json" > AUTH_SEEN.txt'),
            Text(f"Wrote {file}."),
        )
        login.expire()
        with serving(world.node, SETTINGS):
            clone_id = world.node.start(f"owner/app#{number}").id
            record = world.ended(clone_id)
            world.gone(clone_id)
        assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), (
            record,
            world.steps(clone_id),
        )
        records.append((record, set(networks)))

    assert records[0][1] and "none" not in records[0][1], "the owner's own issue ran open"
    assert records[1][1] == {"none"}, "the stranger's issue ran network-off"
    assert len(login.refreshes) >= 2 and all(r.accepted for r in login.refreshes), login.refreshes
    spent = [r.refresh_token for r in login.refreshes]
    assert len(spent) == len(set(spent)), "no refresh token was spent twice"
    assert spent[0] == json.loads(pasted)["tokens"]["refresh_token"]
    for request in world.model.model_requests():
        assert "placeholder" not in json.dumps(dict(request.headers))
    for pull in world.github.pull_requests("owner/app"):
        assert pull.pull is not None
        seen = world.github.read_file("owner/app", pull.pull.head_ref, "AUTH_SEEN.txt") or ""
        assert "shadowclone-placeholder-chatgpt-access-token" in seen
        assert "fake-access" not in seen and "fake-refresh" not in seen


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
