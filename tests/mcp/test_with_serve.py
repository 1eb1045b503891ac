"""End to end: clones started through the MCP server run under a real `shadowclone serve`
with the fake launcher, and the assistant follows, answers, messages and stops them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from shadowclone.config import Paths
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_fake_launch.scripts import SCRIPTS_VARIABLE, Play, Script
from shadowclone_testing.harness import set_up
from shadowclone_testing.mcp_client import call, connected
from shadowclone_testing.serving import WAIT_S, Scripts, ServeProcess, remove_all

pytestmark = pytest.mark.anyio

PR = "https://github.com/acme/app/pull/9"


async def until(
    client: Client, clone_id: str, what: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Poll `get` as an assistant would, until `check` holds; fail after a generous bound."""
    last: dict[str, Any] = {}
    with anyio.move_on_after(WAIT_S):
        while True:
            last = await call(client, "get", clone_id=clone_id, lines=50)
            if check(last):
                return last
            await anyio.sleep(0.1)
    pytest.fail(f"timed out after {WAIT_S:.0f} s waiting for {what}; last seen: {last}")


async def test_a_clone_started_by_the_assistant_asks_is_answered_and_ends_done(
    sc_home: Paths, tmp_path: Path
) -> None:
    set_up(sc_home)
    scripts = Scripts(tmp_path / "scripts.json", tmp_path / "starts.jsonl")
    scripts.set("acme/app#1", Script(play=Play.ASK, pr_url=PR))
    scripts.set("acme/app#2", Script(play=Play.ECHO))
    serve = ServeProcess.start(
        sc_home, "--stop-grace", "5", env={SCRIPTS_VARIABLE: str(scripts.path)}
    )
    try:
        serve.wait_serving()
        async with connected(tmp_path) as client:
            asking = (await call(client, "start", target="acme/app#1"))["id"]
            echoing = (await call(client, "start", target="acme/app#2"))["id"]

            waiting = await until(client, asking, "the question", lambda c: c["state"] == "waiting")
            question = waiting["question"]
            assert (question["text"], question["options"]) == ("Which way?", ["left", "right"])
            listed = await call(client, "list")
            assert {c["id"]: c["state"] for c in listed["clones"]}[asking] == "waiting"
            answered = await call(
                client, "answer", clone_id=asking, question_id=question["id"], choice="2"
            )
            assert answered["text"] == "right"
            done = await until(client, asking, "the clone to end", lambda c: c["state"] == "done")
            assert (done["outcome"], done["pr_url"], done["report"]) == (
                "done",
                PR,
                "answered right",
            )
            final = done["last_progress"][-1]
            assert (final["kind"], final["outcome"]) == ("final", "done")

            await until(client, echoing, "the second clone", lambda c: c["state"] == "running")
            await call(client, "send", clone_id=echoing, text="please add a test")
            await until(
                client,
                echoing,
                "the message to reach the clone",
                lambda c: "please add a test" in [p["text"] for p in c["last_progress"]],
            )
            stopping = await call(client, "stop", clone_id=echoing)
            assert stopping["stop_requested"] is True
            stopped = await until(
                client, echoing, "the clone to stop", lambda c: c["state"] == "stopped"
            )
            assert stopped["outcome"] == "stopped"
            refused = await client.call_tool("send", {"clone_id": echoing, "text": "too late"})
            assert refused.is_error
            assert refused.content[0].model_dump()["text"] == (
                f"clone {echoing} is stopped; it takes no messages"
            )
    finally:
        code = serve.end()
        remove_all(FakeLauncher(default_state_dir()))
    assert code == 0, serve.output
    assert sorted(scripts.starts()) == sorted([asking, echoing])
