"""Whole clones in Docker with the network off: a review of a stranger's pull request, and
a stranger's issue on a ChatGPT plan login, whose token refresh goes through the egress proxy.
Each test asks Docker only about its own clones' containers."""

from __future__ import annotations

import json
from collections.abc import Callable

from shadowclone.config import set_value
from shadowclone.node.schemas import State
from shadowclone.plugin import Outcome
from shadowclone_testing.containers import SETTINGS, World
from shadowclone_testing.fakes.chatgpt import TOKEN_PATH, FakeChatgptLogin
from shadowclone_testing.fakes.models import ModelRequest, Reply, Shell, Text
from shadowclone_testing.harness import set_up
from shadowclone_testing.serving import serving


def test_a_review_of_a_strangers_pull_request_runs_the_engine_with_the_network_off(
    world: World, clone_networks: Callable[[], dict[str, str]]
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
    seen: list[dict[str, str]] = []

    def note_network(request: ModelRequest) -> Reply | None:
        # Asked while the engine's request is open: where does the engine's container sit?
        seen.append(clone_networks())
        return None

    world.model.rule = note_network
    world.model.add(Text("Looks fine, but it needs tests."))
    with serving(world.node, SETTINGS):
        clone_id = world.node.start(f"owner/app#{number}").id
        record = world.ended(clone_id)
        world.gone(clone_id)
    assert (record.state, record.outcome) == (State.DONE, Outcome.DONE), record
    networks = {found[clone_id] for found in seen if clone_id in found}
    assert networks == {"none"}, f"the engine ran with no network: {seen}"
    reviews = world.github.issue("owner/app", number).reviews
    assert "Looks fine, but it needs tests." in reviews[-1].body, "the review was posted"
    assert record.handoffs == 2, "fetched, reviewed off the network, posted"


def test_codex_on_a_chatgpt_plan_refreshes_through_the_proxy_and_the_next_clone_goes_on(
    world: World, clone_networks: Callable[[], dict[str, str]]
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
    seen: list[dict[str, str]] = []

    def expire_then_note(request: ModelRequest) -> Reply | None:
        seen.append(clone_networks())
        login.expire()  # the next request of this clone finds its access token expired
        return None

    records = []
    for number, file in ((own, "GREETING.md"), (strangers, "FAREWELL.md")):
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
        records.append((record, {found[clone_id] for found in seen if clone_id in found}))

    assert records[0][1] and "none" not in records[0][1], f"the owner's issue ran open: {seen}"
    assert records[1][1] == {"none"}, f"the stranger's issue ran network-off: {seen}"
    assert len(login.refreshes) >= 2 and all(r.accepted for r in login.refreshes), login.refreshes
    spent = [r.refresh_token for r in login.refreshes]
    assert len(spent) == len(set(spent)), "no refresh token was spent twice"
    assert spent[0] == json.loads(pasted)["tokens"]["refresh_token"]
    for request in world.model.model_requests():
        assert "placeholder" not in json.dumps(dict(request.headers))
    for pull in world.github.pull_requests("owner/app"):
        assert pull.pull is not None
        auth = world.github.read_file("owner/app", pull.pull.head_ref, "AUTH_SEEN.txt") or ""
        assert "shadowclone-placeholder-chatgpt-access-token" in auth
        assert "fake-access" not in auth and "fake-refresh" not in auth
