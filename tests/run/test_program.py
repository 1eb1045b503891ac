"""runClone end to end: the real run program, the real Claude Code CLI
against the scripted fake model server, real git, and the fake GitHub over HTTP: the target,
the workspace, the working session, its stops and its reviews.

The other themes are beside it: test_program_checks.py, test_program_pauses.py,
test_program_start.py, test_program_github.py."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

import pytest
from shadowclone import files
from shadowclone.node.schemas import (
    INBOX_CLOSED,
    InboxKind,
    InboxLine,
    ProgressKind,
    StopMarker,
    dumps,
)
from shadowclone.node.target import Target
from shadowclone.plugin.contract import RUN_FOLDER_VARIABLE, SECRETS_VARIABLE
from shadowclone.plugin.types import Outcome
from shadowclone.run.headstart import HeadStart
from shadowclone.run.program import run_clone
from shadowclone_testing import project_settings
from shadowclone_testing.clone_world import ANTHROPIC_KEY, World, models
from shadowclone_testing.fakes.models import Hang, Shell, Text
from shadowclone_testing.project_settings import CLAUDE_HOOK_EVENTS


class TestRunProgram:
    engine_binaries = ("claude",)

    def test_an_issue_becomes_a_pull_request(self, world: World) -> None:
        gh = world.github
        main_before = gh.branch_sha("owner/app", "main")
        number = gh.create_issue("owner/app", author="owner", title="Add a greeting!")
        with models(Shell("echo hello > GREETING.md"), Text("Added GREETING.md.")) as server:
            code, lines = world.run(world.folder(number, server))
        final = lines[-1]
        assert (code, final.outcome) == (0, Outcome.DONE)
        assert world.phases == []  # the owner's own work runs in one launch
        [pull] = gh.pull_requests("owner/app")
        assert final.pr_url == f"{gh.url}/owner/app/pull/{pull.number}"
        assert pull.pull is not None and pull.pull.head_ref == "shadowclone/1-add-a-greeting"
        assert f"Closes #{number}" in pull.body and "Added GREETING.md." in pull.body
        assert gh.read_file("owner/app", "shadowclone/1-add-a-greeting", "GREETING.md") == "hello\n"
        assert gh.branch_sha("owner/app", "main") == main_before
        steps = [line.step.value for line in lines]
        assert steps.index("target") < steps.index("workspace") < steps.index("hooks")
        assert steps.index("hooks") < steps.index("engine") < steps.index("review")
        assert steps.index("review") < steps.index("save") < steps.index("finish")
        assert final.report is not None and "GREETING.md | 1 +" in final.report

    @pytest.mark.parametrize("head_start", [True, False], ids=["head-start", "no-head-start"])
    def test_an_issue_that_cannot_be_read_fails_with_one_line_while_cloning(
        self, world: World, head_start: bool
    ) -> None:
        """The clone begins as soon as the repository is read: a target that cannot be read
        after it (an issue that does not exist) still ends the clone with one line saying so,
        and the engine never starts."""
        with models(Text("never asked")) as server:
            code, lines = world.run(world.folder(404, server), head_start)
            assert server.requests == []
        assert (code, lines[-1].outcome) == (1, Outcome.FAILED)
        [error] = [line for line in lines if line.kind is ProgressKind.ERROR]
        assert error.step.value == "target"
        assert "owner/app#404: 404 Not Found" in error.text
        assert [line for line in lines if line.step.value == "engine"] == []

    @pytest.mark.parametrize("head_start", [True, False], ids=["head-start", "no-head-start"])
    def test_a_repository_that_does_not_exist_fails_at_the_target_with_githubs_word(
        self, world: World, head_start: bool
    ) -> None:
        """The clone starts before the repository is read: when there is none, the line says
        what GitHub said of it, not what git said of the clone."""
        with models(Text("never asked")) as server:
            folder = world.folder(1, server, target=Target("owner", "nothing-here", 1))
            code, lines = world.run(folder, head_start)
            assert server.requests == []
        assert (code, lines[-1].outcome) == (1, Outcome.FAILED)
        [error] = [line for line in lines if line.kind is ProgressKind.ERROR]
        assert error.step.value == "target"
        # The repository's read, told first though the issue's failed as well.
        assert "GitHub cannot read the repository owner/nothing-here: 404" in error.text
        assert "git" not in error.text

    @pytest.mark.parametrize("head_start", [True, False], ids=["head-start", "no-head-start"])
    def test_a_target_spelled_otherwise_is_cloned_from_where_github_says(
        self, world: World, head_start: bool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The clone starts from the address the target's name gives; GitHub names the
        repository in its own letter case, and the workspace's origin is GitHub's address."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Respelled")
        with (
            caplog.at_level(logging.INFO, "shadowclone.run.program"),
            models(Shell("echo hi > HI.md"), Text("Added HI.md.")) as server,
        ):
            folder = world.folder(number, server, target=Target("OWNER", "App", number))
            code, lines = world.run(folder, head_start)
        assert f"cloning again from {gh.url}/owner/app.git" in caplog.text
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        assert gh.read_file("owner/app", f"shadowclone/{number}-respelled", "HI.md") == "hi\n"
        origin = (folder.path / "private" / "git" / "config").read_text()
        assert f"url = {gh.url}/owner/app.git" in origin

    @pytest.mark.parametrize("head_start", [True, False], ids=["head-start", "no-head-start"])
    def test_with_no_http_github_url_the_clone_waits_for_githubs_address(
        self, world: World, head_start: bool, caplog: pytest.LogCaptureFixture
    ) -> None:
        """No guess from a GitHub URL git would read as a path: git never clones from there,
        and the clone comes from the address GitHub gives."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="No guess")
        with (
            caplog.at_level(logging.INFO, "shadowclone.run.program"),
            models(Text("Nothing to do.")) as server,
        ):
            folder = world.folder(number, server, github_url="/srv/git")
            code, lines = world.run(folder, head_start)
        assert "cloning again" not in caplog.text
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        origin = (folder.path / "private" / "git" / "config").read_text()
        assert f"url = {gh.url}/owner/app.git" in origin

    def test_a_head_start_of_another_request_is_thrown_away(
        self, world: World, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A head start is taken only for the request it read: one begun for another issue is
        ended, its clone removed, and the target step does its own reads and clone."""
        gh = world.github
        first = gh.create_issue("owner/app", author="owner", title="First")
        second = gh.create_issue("owner/app", author="owner", title="Second")
        secrets = world.secrets()
        with (
            caplog.at_level(logging.WARNING, "shadowclone.run.program"),
            models(Text("Nothing to do.")) as server,
        ):
            other = world.folder(first, server)
            environ = {RUN_FOLDER_VARIABLE: str(other.path), SECRETS_VARIABLE: str(secrets)}
            head = HeadStart.begin({**os.environ, **environ})
            assert head is not None and head.cloning is not None
            folder = world.folder(second, server)
            code = asyncio.run(run_clone(folder, secrets, head_start=head))
        assert code == 0
        assert "the head start read another request" in caplog.text
        assert head.take_client() is None
        assert not (other.path / "workspace").exists() and not (other.path / "private").exists()
        lines, _, _ = folder.progress()
        assert lines[-1].outcome is Outcome.DONE
        assert any(f"shadowclone/{second}-second" in line.text for line in lines)

    def test_the_head_start_prepares_an_issues_workspace_and_leaves_a_review_to_the_step(
        self, world: World
    ) -> None:
        """An issue's workspace is prepared by the entry point's thread, which the workspace
        step takes; a review fetches the pull request over the network, and its step does."""
        gh = world.github
        issue = gh.create_issue("owner/app", author="owner", title="Early")
        with models(Shell("echo early > EARLY.md"), Text("Added EARLY.md.")) as server:
            code, lines = world.run(world.folder(issue, server))
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        prepared = world.heads[-1].prepared.result()
        assert prepared is not None and prepared.path == world.tmp / f"run-{issue}" / "workspace"
        assert prepared.base_ref == gh.branch_sha("owner/app", "main")
        assert gh.read_file("owner/app", f"shadowclone/{issue}-early", "EARLY.md") == "early\n"
        pull = gh.create_pull_request(
            "owner/app", author="stranger", branch="x", title="X", files={"x": "x\n"}, fork=True
        )
        with models(Text("Looks fine.")) as server:
            code, lines = world.run(world.folder(pull, server))
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        assert world.heads[-1].prepared.result() is None

    def test_the_owners_pull_request_is_continued_on_its_branch(self, world: World) -> None:
        gh = world.github
        number = gh.create_pull_request(
            "owner/app", author="owner", branch="feature", title="Feature", files={"a.txt": "a\n"}
        )
        before = gh.branch_sha("owner/app", "feature")
        with models(Shell("echo more >> a.txt"), Text("Extended a.txt.")) as server:
            code, lines = world.run(world.folder(number, server))
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        assert gh.read_file("owner/app", "feature", "a.txt") == "a\nmore\n"
        assert gh.branch_sha("owner/app", "feature") != before
        assert len(gh.pull_requests("owner/app")) == 1  # no second pull request
        assert "Extended a.txt." in gh.comments("owner/app", number)[-1].body

    def test_a_strangers_pull_request_is_only_reviewed_and_its_code_never_run(
        self, world: World
    ) -> None:
        gh = world.github
        marker = world.tmp / "the-code-ran"
        number = gh.create_pull_request(
            "owner/app",
            author="stranger",
            branch="evil",
            title="Helpful change",
            files={"app.py": "print('hi')\n"},
            fork=True,
        )
        before = {b: gh.branch_sha("owner/app", b) for b in ("main",)}
        with models(Text("Looks fine, but add tests.")) as server:
            folder = world.folder(number, server, check_commands=(f"touch {marker}",))
            code, lines = world.run(folder)
            [request] = [r for r in server.requests if r.api == "anthropic"][:1]
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        assert not marker.exists(), "the toolchain ran a stranger's code"
        assert world.phases == ["model-only", "open"]  # the engine ran with the network off
        assert any("toolchain: passed: skipped" in line.text for line in lines)
        assert "WebFetch" not in request.tool_names() and "WebSearch" not in request.tool_names()
        assert "Looks fine, but add tests." in gh.issue("owner/app", number).reviews[-1].body
        assert {b: gh.branch_sha("owner/app", b) for b in before} == before
        assert not [r for r in gh.requests() if r.path.endswith("git-receive-pack")]

    def test_the_owners_own_pull_request_keeps_its_claude_settings(self, world: World) -> None:
        """The control of the test below: on the owner's own head Claude Code loads the
        repository's settings, and its hooks run."""
        gh = world.github
        markers = world.tmp / "markers"
        markers.mkdir()
        number = gh.create_pull_request(
            "owner/app",
            author="owner",
            branch="hooks",
            title="Hooks",
            files=project_settings.claude_files(markers),
        )
        with models(Shell("echo looked"), Text("Looked.")) as server:
            code, lines = world.run(world.folder(number, server))
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        left = project_settings.markers_left(markers)
        assert {f"claude-hook-{event}" for event in CLAUDE_HOOK_EVENTS} <= set(left), left
        assert not any("engines' settings" in line.text for line in lines)

    def test_a_stop_mid_run_still_pushes_the_work(self, world: World) -> None:
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Long work")
        hang = Hang()
        with models(Shell("echo wip > WIP.md"), hang) as server:
            folder = world.folder(number, server)

            def stop_when_the_work_exists() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if (folder.path / "workspace" / "WIP.md").exists():
                        folder.write_stop(StopMarker())
                        return
                    time.sleep(0.1)

            stopper = threading.Thread(target=stop_when_the_work_exists)
            stopper.start()
            code, lines = world.run(folder)
            stopper.join()
            hang.release()
        assert lines[-1].outcome is Outcome.STOPPED and code == 0
        assert gh.read_file("owner/app", "shadowclone/1-long-work", "WIP.md") == "wip\n"
        assert gh.pull_requests("owner/app") == []  # only finished work opens a pull request

    def test_a_stop_during_the_reviews_skips_the_remaining_reviews(self, world: World) -> None:
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Reviewed work")
        with models(Shell("echo done > DONE.md"), Text("Wrote DONE.md.")) as server:
            # The toolchain stage (the first) runs this; the stop comes while it runs.
            folder = world.folder(number, server, check_commands=("touch CHECKING; sleep 3",))

            def stop_during_the_checks() -> None:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    if (folder.path / "workspace" / "CHECKING").exists():
                        folder.write_stop(StopMarker())
                        return
                    time.sleep(0.05)

            stopper = threading.Thread(target=stop_during_the_checks)
            stopper.start()
            code, lines = world.run(folder)
            stopper.join()
            engine_calls = len([r for r in server.requests if r.api == "anthropic"])
        texts = [line.text for line in lines]
        # The session stays open while its last turn is reviewed: the stop ends it there.
        assert lines[-1].outcome is Outcome.STOPPED and code == 0
        assert any(t.startswith("toolchain: passed") for t in texts), texts
        assert "stop requested: skipping the remaining reviews" in texts, "\n".join(texts)
        assert not [t for t in texts if t.startswith("self-review:")], texts
        assert engine_calls == 2, "the self-review consulted the engine after the stop"
        assert gh.read_file("owner/app", "shadowclone/1-reviewed-work", "DONE.md") == "done\n"

    def test_a_message_after_the_last_turn_starts_a_new_turn_and_is_reviewed_again(
        self, world: World
    ) -> None:
        """A message that comes while the last turn's result is reviewed reaches the model
        once, in the same session; the new result is reviewed; the report lists the message."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="More work")
        message = "Owner says: also write LATE.md."
        late = Shell("echo late > LATE.md")
        with models(Shell("echo a > A.md"), Text("Wrote A.md.")) as server:
            server.rule = lambda request: (
                (late if not request.contains("echo late") else Text("Wrote LATE.md."))
                if request.last_user_text() == message or request.contains("echo late")
                else None
            )
            folder = world.folder(number, server, check_commands=("touch CHECKING; sleep 2",))

            def send_during_the_reviews() -> None:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    if (folder.path / "workspace" / "CHECKING").exists():
                        line = InboxLine(id="late-1", kind=InboxKind.MESSAGE, text=message)
                        folder.append_inbox(line)  # as `send` does
                        files.append_line(folder.deliveries_file, dumps(line))  # as serve does
                        return
                    time.sleep(0.05)

            sender = threading.Thread(target=send_during_the_reviews)
            sender.start()
            code, lines = world.run(folder)
            sender.join()
            carrying = [r for r in server.requests if r.api == "anthropic" and r.contains(message)]
        texts = [line.text for line in lines]
        assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts
        assert [line.text for line in lines if line.kind is ProgressKind.MESSAGE] == [message]
        # Exactly once: one request brought it as the new user turn, of the first session.
        assert [r for r in carrying if r.last_user_text() == message]
        assert all(r.user_texts().count(message) == 1 for r in carrying)
        assert all(r.contains("Wrote A.md.") for r in carrying), "not the same session"
        assert len([t for t in texts if t.startswith("toolchain: passed")]) == 2, texts
        assert texts.index(INBOX_CLOSED) > texts.index(message)
        assert gh.read_file("owner/app", "shadowclone/1-more-work", "LATE.md") == "late\n"
        report = lines[-1].report or ""
        assert f"{message!r}: reached the engine" in report

    def test_secrets_never_reach_progress_lines_or_the_report(self, world: World) -> None:
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Leak")
        said = f"The key is {ANTHROPIC_KEY} and the token {world.token}."
        with models(Shell(f"echo note > NOTE.md; echo {ANTHROPIC_KEY}"), Text(said)) as server:
            folder = world.folder(number, server)
            code, _lines = world.run(folder)
        assert code == 0
        written = folder.progress_file.read_text()
        assert ANTHROPIC_KEY not in written and world.token not in written
        assert "[redacted]" in written
        [pull] = gh.pull_requests("owner/app")
        assert ANTHROPIC_KEY not in pull.body and world.token not in pull.body
