"""runClone end to end, how the engine starts: early, beside the target and workspace
steps, or going on with the session an earlier clone kept (the real engines, the fake model
server and GitHub)."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path

import attrs
import psutil
import pytest
from shadowclone.node.schemas import SavedSession, StopMarker
from shadowclone.node.sessions import copy_session, read_session, write_session
from shadowclone.node.target import Target
from shadowclone.plugin.types import Outcome
from shadowclone.run.program import run_clone
from shadowclone_testing.clone_world import LOGINS, World, models
from shadowclone_testing.fakes.models import Shell, Text
from shadowclone_testing.suites.engine import odd_sleep, processes_running


class TestEarlyStart:
    """Codex starts early (`StartsEarly`): its program runs while the run program reads the
    target and clones the workspace, and the session opens in the workspace once it is
    ready; a clone that ends or hands on before its engine's turn leaves no engine running."""

    engine_binaries = ("codex",)

    def test_the_early_engine_works_in_the_workspace_with_its_instructions(
        self, world: World, caplog: pytest.LogCaptureFixture
    ) -> None:
        gh = world.github
        gh.create_repo(
            "owner/documented",
            files={"README.md": "# documented\n", "AGENTS.md": "Marker 7f3e: say hello first.\n"},
        )
        number = gh.create_issue("owner/documented", author="owner", title="Read the readme")
        caplog.set_level(logging.INFO)
        with models(Shell("pwd && cat README.md"), Text("Read it.")) as server:
            target = Target("owner", "documented", number)
            folder = world.on("codex", number, server, target=target)
            code, lines = world.run(folder)
            first, second = [r for r in server.model_requests() if r.api == "openai"][:2]
        assert (code, lines[-1].outcome) == (0, Outcome.DONE), [line.text for line in lines]
        messages = [record.getMessage() for record in caplog.records]
        started = [text for text in messages if "started codex app-server" in text]
        assert len(started) == 1 and f"{folder.path}/engine/state-" in started[0], started
        assert "the engine started early, beside the target and workspace steps" in messages
        # The program started before the workspace existed; its session works there, with the
        # repository's own instructions.
        assert sum("Marker 7f3e" in text for text in first.user_texts()) == 1
        results = "\n".join(second.tool_results())
        assert str((folder.path / "workspace").resolve()) in results, results
        assert "# documented" in results, results

    @pytest.mark.parametrize("ending", ["handed on", "stopped"])
    def test_an_engine_started_early_is_ended_when_the_clone_goes_another_way(
        self, world: World, ending: str
    ) -> None:
        gh = world.github
        author = "stranger" if ending == "handed on" else "owner"
        number = gh.create_issue("owner/app", author=author, title="Early end")
        before = {child.pid for child in psutil.Process().children()}
        with models(Text("Done.")) as server:
            folder = world.on("codex", number, server)
            if ending == "stopped":
                folder.write_stop(StopMarker())
                code = asyncio.run(run_clone(folder, world.secrets()))
                lines, _, _ = folder.progress()
                assert (code, lines[-1].outcome) == (0, Outcome.STOPPED)
                assert server.model_requests() == []
            else:
                code = asyncio.run(run_clone(folder, world.secrets()))
                assert code == 0 and folder.handoff() is not None  # the engine works next phase
        left = [child for child in psutil.Process().children() if child.pid not in before]
        _gone, alive = psutil.wait_procs(left, timeout=5)
        assert not alive, f"an engine started early outlived its phase: {alive}"

    def test_a_stop_does_not_wait_for_an_engine_still_starting(
        self, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A Codex that never answers its handshake: the clone stopped meanwhile ends without
        waiting out the handshake's minute, and leaves no process behind."""
        programs = tmp_path / "hung-bin"
        programs.mkdir()
        hung = programs / "codex"
        sleep = odd_sleep(613)
        hung.write_text(f"#!/bin/sh\nexec {sleep}\n")
        hung.chmod(0o755)
        monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
        number = world.github.create_issue("owner/app", author="owner", title="Hung start")
        with models(Text("never asked")) as server:
            folder = world.on("codex", number, server)
            folder.write_stop(StopMarker())
            code = asyncio.run(asyncio.wait_for(run_clone(folder, world.secrets()), 30))
        lines, _, _ = folder.progress()
        assert (code, lines[-1].outcome) == (0, Outcome.STOPPED)
        assert not processes_running(sleep), "the hung engine outlived the clone"


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_the_next_clone_on_a_pull_request_resumes_the_session_that_made_it(
    world: World, engine: str
) -> None:
    """The clone that opened a pull request keeps its engine's session in its run folder;
    given it (as serve gives it), the next clone on the pull request resumes it, so the model
    sees the earlier work, a tool's output included, and then the new task."""
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Remember this")
    work = Shell("echo remember-me-42 > NOTE.md && echo wrote-the-note")
    with models(work, Text("Wrote the note.")) as server:
        first = world.on(engine, number, server)
        code, lines = world.run(first)
    texts = [line.text for line in lines]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts
    assert any(t.endswith("is kept for the next clone on the pull request") for t in texts)
    saved, contents = read_session(first.saved_session_dir)
    assert (saved.engine, saved.login) == (engine, LOGINS[engine])
    assert any(b"wrote-the-note" in data for data in contents)
    [pull] = [p.number for p in gh.pull_requests("owner/app")]
    gh.add_comment("owner/app", pull, author="owner", body="Now sign the note.")
    with models(Shell("echo signed >> NOTE.md"), Text("Signed.")) as server:
        second = world.on(engine, pull, server)
        copy_session(first.saved_session_dir, second.given_session_dir, first.id)
        code, lines = world.run(second)
        requests = server.model_requests()
    texts = [line.text for line in lines]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts
    resumed = f"the engine goes on with the session of clone {first.id}, which worked on this "
    assert f"{resumed}pull request" in texts
    assert requests[0].contains("wrote-the-note") and requests[0].contains("Remember this")
    assert "Now sign the note." in (requests[0].last_user_text() or "")
    assert gh.read_file("owner/app", "shadowclone/1-remember-this", "NOTE.md") == (
        "remember-me-42\nsigned\n"
    )
    # The session goes on: the second clone keeps it, with both clones' work in it.
    resaved, contents = read_session(second.saved_session_dir)
    assert resaved.session_id == saved.session_id
    assert any(b"wrote-the-note" in data and b"signed" in data for data in contents)


def test_a_session_the_engine_cannot_resume_is_left_for_a_fresh_one(world: World) -> None:
    """A given session whose transcript is gone: Claude Code ends at once, and the clone starts
    a new session from the conversation, saying so."""
    gh = world.github
    pull = gh.create_pull_request(
        "owner/app", author="owner", branch="feature", title="Feature", files={"a.txt": "a\n"}
    )
    lost = SavedSession("claude", "claude-api-key", str(uuid.uuid4()), ())
    with models(Text("Started afresh.")) as server:
        folder = world.folder(pull, server)
        write_session(folder.given_session_dir, attrs.evolve(lost, clone_id="c-1"), [])
        code, lines = world.run(folder)
        requests = server.model_requests()
    texts = [line.text for line in lines]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), "\n".join(texts)
    assert any(t.startswith("the engine could not go on with clone c-1's session") for t in texts)
    assert "Started afresh." in texts
    assert requests[0].contains("Feature") and not requests[0].contains("No conversation found")
