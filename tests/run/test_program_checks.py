"""runClone end to end, its checks: the review stages' checks go back to the engine, and
a stranger's engine settings run nothing (the real engines, the fake model server and
GitHub)."""

from __future__ import annotations

import threading
import time

import pytest
from shadowclone.node.schemas import Caps, Price
from shadowclone.plugin.types import Outcome
from shadowclone_testing import project_settings
from shadowclone_testing.clone_world import World, deliver, models
from shadowclone_testing.fakes.models import Shell, Text

CHECK = "test -f FIXED.md || { echo FIXED.md is missing; exit 1; }"


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_a_strangers_pull_request_s_engine_settings_run_nothing(world: World, engine: str) -> None:
    """A stranger's pull request that adds hooks, MCP servers and `notify` for both engines:
    the review completes on the real CLI, none of them runs (in the working session nor in the
    self-review's), and the review still reads the pull request's changes to those files."""
    gh = world.github
    markers = world.tmp / "markers"
    markers.mkdir()
    gh.commit("owner/app", "main", {"CLAUDE.md": "Base rule 41d0.\n"}, author="owner")
    files = {
        **project_settings.all_files(markers),
        "CLAUDE.md": "Stranger rule 6b2e.\n",
        "AGENTS.md": "Stranger rule 6b2e.\n",
        "app.py": "print('hi')\n",
    }
    number = gh.create_pull_request(
        "owner/app", author="stranger", branch="evil", title="Tooling", files=files, fork=True
    )
    with models(Shell("echo looked"), Text("Looks fine.")) as server:
        code, lines = world.run(world.on(engine, number, server))
        requests = server.model_requests()
    assert (code, lines[-1].outcome) == (0, Outcome.DONE)
    assert world.phases == ["model-only", "open"]
    assert project_settings.markers_left(markers) == []
    [taken] = [line.text for line in lines if "engines' settings" in line.text]
    assert "taken from the base" in taken and "CLAUDE.md" in taken
    for path in (".claude", ".codex", ".mcp.json", "AGENTS.md"):
        assert path in taken.partition("removed (not on the base): ")[2], taken
    workspace = world.tmp / f"run-{number}" / "workspace"
    assert (workspace / "CLAUDE.md").read_text() == "Base rule 41d0.\n"
    assert not (workspace / ".claude").exists() and not (workspace / "AGENTS.md").exists()
    assert not any(request.contains("Stranger rule 6b2e") for request in requests[:2])
    # The self-review's session reads the pull request's own changes to them.
    assert any(request.contains("claude-hook-SessionStart") for request in requests[2:])
    assert "Looks fine." in gh.issue("owner/app", number).reviews[-1].body


@pytest.mark.parametrize("engine", ["claude", "codex"])
def test_failing_checks_go_back_to_the_engine_and_pass_after_its_fix(
    world: World, engine: str
) -> None:
    """The repository's check fails on the first turn's work: its output goes back to the
    engine as the session's next turn, the engine fixes the code, the checks pass."""
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Checked work")
    fix = Shell("echo fixed > FIXED.md")
    with models(Shell("echo work > WORK.md"), Text("Wrote WORK.md.")) as server:
        server.rule = lambda request: (
            (Text("Fixed: FIXED.md exists.") if request.contains("echo fixed") else fix)
            if request.contains("FIXED.md is missing")
            else None
        )
        folder = world.on(engine, number, server, check_commands=(CHECK,), fix_rounds=2)
        code, lines = world.run(folder)
        told = [r for r in server.model_requests() if r.contains("FIXED.md is missing")]
    texts = [line.text for line in lines]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts
    toolchain = [t.split(":")[1].strip() for t in texts if t.startswith("toolchain:")]
    assert toolchain == ["failed", "passed"], texts
    assert "the checks failed: they go back to the engine (fix round 1 of 2)" in texts
    assert told and told[0].contains("Wrote WORK.md."), "not the same session"
    assert gh.read_file("owner/app", "shadowclone/1-checked-work", "FIXED.md") == "fixed\n"
    assert "review toolchain: passed" in (lines[-1].report or "")


def test_checks_that_still_fail_after_the_fix_rounds_are_reported(world: World) -> None:
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Still failing")
    with models(Shell("echo work > WORK.md"), Text("Wrote WORK.md.")) as server:
        folder = world.folder(number, server, check_commands=(CHECK,), fix_rounds=1)
        code, lines = world.run(folder)
        told = [r for r in server.model_requests() if r.contains("FIXED.md is missing")]
    texts = [line.text for line in lines]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts
    toolchain = [t.split(":")[1].strip() for t in texts if t.startswith("toolchain:")]
    assert toolchain == ["failed", "failed"], texts  # one round back to the engine, no more
    assert told, "the failing checks never reached the engine"
    assert "review toolchain: failed" in (lines[-1].report or "")
    [pull] = gh.pull_requests("owner/app")
    assert "toolchain" in pull.body


@pytest.mark.parametrize("engine", ["claude", "codex"])
@pytest.mark.parametrize("cap", ["turns", "cost"])
def test_a_cap_reached_by_a_turn_whose_checks_fail_holds_the_fix_turn(
    world: World, engine: str, cap: str
) -> None:
    """The turn reaches the clone's cap and its checks fail: before the checks go back to the
    engine as a new turn the owner is asked, no request reaches the model meanwhile, and
    "finish" leaves the fix turn unrun: the draft holds only the work up to the cap."""
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Capped checks")
    caps = Caps(turns=1) if cap == "turns" else Caps(cost_usd=0.01)
    with models(Shell("echo work > WORK.md"), Text("Wrote WORK.md.")) as server:
        server.rule = lambda request: (
            Shell("echo fixed > FIXED.md") if request.contains("FIXED.md is missing") else None
        )
        folder = world.on(
            engine,
            number,
            server,
            caps=caps,
            check_commands=(CHECK,),
            fix_rounds=1,
            price=Price(1e6, 1e6),  # Codex's tokens priced (Claude Code prices its own)
        )
        seen: list[int] = []

        def finish_at_the_question() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                lines, _, _ = folder.progress()
                if any(line.final for line in lines):
                    return
                asked = [line.question for line in lines if line.question is not None]
                if asked:
                    before = len(server.model_requests())
                    time.sleep(2)  # nothing may leave while the owner is asked
                    seen.append(len(server.model_requests()) - before)
                    deliver(folder, asked[0].id, "finish now")
                    return
                time.sleep(0.05)

        owner = threading.Thread(target=finish_at_the_question)
        owner.start()
        code, lines = world.run(folder)
        owner.join()
        requests = server.model_requests()
    texts = [line.text for line in lines]
    assert (code, lines[-1].outcome) == (0, Outcome.STOPPED), texts
    assert seen == [0], "a model request went out while the owner was asked"
    assert not [r for r in requests if r.contains("FIXED.md is missing")], "the fix turn ran"
    assert "the checks failed: they go back to the engine (fix round 1 of 1)" not in texts
    asked = [line.question for line in lines if line.question is not None]
    assert len(asked) == 1 and asked[0].cap
    named = "its cap of 1 turns" if cap == "turns" else "its cost cap of $0.01"
    assert named in asked[0].text and named in (lines[-1].report or "")
    [pull] = gh.pull_requests("owner/app")
    assert pull.pull is not None and pull.pull.draft
    branch = "shadowclone/1-capped-checks"
    assert gh.read_file("owner/app", branch, "WORK.md") == "work\n"
    assert gh.read_file("owner/app", branch, "FIXED.md") is None
