"""runClone end to end, its pauses: caps reached and usage limits, the session resumed in
the same process or by a later launch, and what the usage is priced at (the real engines,
the fake model server and GitHub)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from shadowclone import files
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    Caps,
    InboxKind,
    InboxLine,
    Price,
    ProgressKind,
    ResumeMarker,
    StopMarker,
    dumps,
)
from shadowclone.plugin.types import Outcome
from shadowclone.run.prompt import RESUME_PROMPT
from shadowclone_testing.clone_world import World, deliver, models
from shadowclone_testing.fakes.models import ApiError, Hang, Shell, Text, UsageLimit

LONG_WAITS = {"in its process": 7200.0, "out of it": 60.0}
"""`long_wait_s` for a clone that waits an hour for its usage limit in its process, or out."""


def resume(folder: RunFolder) -> None:
    folder.write_resume(ResumeMarker())


def stop(folder: RunFolder) -> None:
    folder.write_stop(StopMarker())


def processes_in(place: Path) -> list[psutil.Process]:
    """Live processes working in `place` or below (an engine, its tools)."""
    found = []
    for process in psutil.process_iter(["cwd", "status"]):
        cwd = process.info["cwd"] or ""
        if cwd.startswith(str(place)) and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


@pytest.mark.parametrize("engine", ["claude", "codex"])
class TestPauses:
    """A cap reached pauses either real engine at the model proxy and asks the owner; a login's
    usage limit pauses it until the reset the provider names."""

    def test_a_usage_limit_ends_the_engine_and_its_session_resumes_at_the_reset(
        self, world: World, engine: str
    ) -> None:
        """The engine ends at the limit (its refusal never reaches it); at the reset a new
        engine process resumes the same session: the model sees the earlier conversation,
        the tool's output included, and then the resume prompt."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Limited work")
        shell = Shell("echo before-the-limit > BEFORE.md && echo wrote-before")
        # The wait for the reset is longer than the stall timeout, which is longer than an
        # engine takes to start under load: the wait is no stall.
        with models(shell, UsageLimit(reset_in_s=8), Text("Done after the reset.")) as server:
            folder = world.on(engine, number, server, stall_timeout_s=5)
            code, lines = world.run(folder)
            requests = server.model_requests()
        assert (code, lines[-1].outcome) == (0, Outcome.DONE), [line.text for line in lines]
        texts = [line.text for line in lines]
        assert any("login's usage limit is reached: the engine ends now" in t for t in texts)
        assert any(t.startswith("the usage limit has reset: the engine resumes") for t in texts)
        assert "Done after the reset." in texts
        limited = requests[1]
        resumed = [r for r in requests[2:] if r.last_user_text() == RESUME_PROMPT]
        assert resumed, [r.last_user_text() for r in requests]
        # The same conversation: the task and the tool's output from before the limit.
        assert resumed[0].contains("wrote-before")
        assert resumed[0].contains("Limited work")
        assert all(r.body != limited.body for r in requests[2:]), "the refused request went again"
        assert not [line for line in lines if line.kind is ProgressKind.ERROR], "\n".join(texts)
        scheduled = [line for line in lines if line.kind is ProgressKind.SCHEDULED]
        assert [line.until is not None for line in scheduled] == [True, False]
        assert gh.read_file("owner/app", "shadowclone/1-limited-work", "BEFORE.md") == (
            "before-the-limit\n"
        )

    def test_an_overloaded_provider_is_ridden_out(self, world: World, engine: str) -> None:
        """529 twice: the proxy sends the request again (the engine sees neither), says so
        once for serve, and the clone finishes; each request reached the model once a try."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Busy work")
        overloaded = ApiError("overloaded", status=529)
        with models(overloaded, overloaded, Text("Done despite the load.")) as server:
            folder = world.on(
                engine,
                number,
                server,
            )
            code, lines = world.run(folder)
            first, second, third = server.model_requests()[:3]
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        assert first.body == second.body == third.body
        assert [line.kind for line in lines].count(ProgressKind.OVERLOADED) == 1
        assert "Done despite the load." in [line.text for line in lines]

    def test_a_long_usage_limit_ends_the_clone_and_a_later_launch_resumes_its_session(
        self, world: World, engine: str
    ) -> None:
        """A reset further away than `long_wait_s`: the engine ends and the clone's process
        exits 0, its session and state folder kept and a handoff naming the reset; launched
        again at the reset, it resumes the same session (the model sees the earlier
        conversation, the tool's output included, then the resume prompt), and a message
        sent while nothing ran reaches the engine once."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Limited work")
        message = "Owner says: also write AFTER.md."
        after = Shell("echo after-the-limit > AFTER.md")
        shell = Shell("echo before-the-limit > BEFORE.md && echo wrote-before")
        seen: dict[str, Any] = {}

        def while_waiting(folder: RunFolder) -> None:
            lines, _, _ = folder.progress()
            seen["final"] = [line for line in lines if line.final]
            seen["state dirs"] = sorted((folder.path / "engine").glob("state-*"))
            seen["engines"] = processes_in(folder.path)
            line = InboxLine(id="while-waiting", kind=InboxKind.MESSAGE, text=message)
            folder.append_inbox(line)  # as `send` does
            files.append_line(folder.deliveries_file, dumps(line))  # as serve does

        with models(shell, UsageLimit(reset_in_s=4), Text("Done after the reset.")) as server:
            server.rule = lambda request: (
                (after if not request.contains("echo after-the-limit") else Text("Wrote it."))
                if request.last_user_text() == message or request.contains("echo after-the-limit")
                else None
            )
            folder = world.on(engine, number, server, long_wait_s=1)
            code, lines = world.run(folder, while_waiting=while_waiting)
            requests = server.model_requests()
        texts = [line.text for line in lines]
        assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts
        [waited] = world.waits
        assert waited.not_before is not None and waited.network.value == "open"
        assert seen["final"] == [] and seen["engines"] == []
        assert len(seen["state dirs"]) == 1, "the session's state folder is not kept"
        assert any("the clone's process with it" in t for t in texts), texts
        assert "launched again to resume the engine's session, which a usage limit ended" in texts
        # The resume prompt after the earlier conversation (the message, already delivered,
        # may come with it: Claude Code sends both in one request).
        resumed = [r for r in requests if r.contains(RESUME_PROMPT)]
        assert resumed, [r.last_user_text() for r in requests]
        assert resumed[0].contains("wrote-before") and resumed[0].contains("Limited work")
        assert not [r for r in requests[:2] if r.contains(RESUME_PROMPT)]
        # The message: once, to the resumed session.
        assert [line.text for line in lines if line.kind is ProgressKind.MESSAGE] == [message]
        carrying = [r for r in requests if r.contains(message)]
        assert [r for r in carrying if r.last_user_text() == message]
        assert all(r.user_texts().count(message) == 1 for r in carrying)
        assert all(r.contains("wrote-before") for r in carrying), "not the same session"
        scheduled = [line for line in lines if line.kind is ProgressKind.SCHEDULED]
        assert [line.until is not None for line in scheduled] == [True, False]
        branch = "shadowclone/1-limited-work"
        assert gh.read_file("owner/app", branch, "BEFORE.md") == "before-the-limit\n"
        assert gh.read_file("owner/app", branch, "AFTER.md") == "after-the-limit\n"
        assert f"{message!r}: reached the engine" in (lines[-1].report or "")
        assert not (folder.path / "engine").exists()
        assert not folder.handoff_file.exists()

    @pytest.mark.parametrize("where", ["in its process", "out of it"])
    def test_the_owner_resumes_a_scheduled_clone_before_the_reset(
        self, world: World, engine: str, where: str
    ) -> None:
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Limited work")
        with models(UsageLimit(reset_in_s=3600), Text("Done, resumed.")) as server:
            folder = world.on(engine, number, server, long_wait_s=LONG_WAITS[where])

            def resume_once_scheduled() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    lines, _, _ = folder.progress()
                    if any(line.kind is ProgressKind.SCHEDULED for line in lines):
                        folder.write_resume(ResumeMarker())
                        return
                    time.sleep(0.05)

            if where == "in its process":
                owner = threading.Thread(target=resume_once_scheduled)
                owner.start()
                code, lines = world.run(folder)
                owner.join()
            else:
                code, lines = world.run(folder, while_waiting=resume)
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        texts = [line.text for line in lines]
        assert "the owner resumed the clone" in texts and "Done, resumed." in texts
        assert len(world.waits) == (where == "out of it")

    @pytest.mark.parametrize("where", ["in its process", "out of it"])
    def test_a_stop_ends_a_scheduled_clone_at_once(
        self, world: World, engine: str, where: str
    ) -> None:
        """Stopped while it waits for an hour-away reset: the clone ends stopped now, its
        work before the limit pushed, and no engine is started again (out of its process:
        the launch the stop brings saves the work)."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Stopped while limited")
        shell = Shell("echo before-the-stop > BEFORE.md")
        with models(shell, UsageLimit(reset_in_s=3600)) as server:
            folder = world.on(engine, number, server, long_wait_s=LONG_WAITS[where])

            def stop_once_scheduled() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    lines, _, _ = folder.progress()
                    if any(line.kind is ProgressKind.SCHEDULED for line in lines):
                        folder.write_stop(StopMarker())
                        return
                    time.sleep(0.05)

            if where == "in its process":
                owner = threading.Thread(target=stop_once_scheduled)
                owner.start()
                code, lines = world.run(folder)  # not an hour: pytest's timeout would end it
                owner.join()
            else:
                code, lines = world.run(folder, while_waiting=stop)
            requests = len(server.model_requests())
        texts = [line.text for line in lines]
        assert (code, lines[-1].outcome) == (0, Outcome.STOPPED), texts
        assert requests == 2, "an engine was started again after the stop"
        assert not [t for t in texts if t.startswith("the usage limit has reset")], texts
        branch = "shadowclone/1-stopped-while-limited"
        assert gh.read_file("owner/app", branch, "BEFORE.md") == "before-the-stop\n"
        assert len(world.waits) == (where == "out of it")
        assert not (folder.path / "engine").exists()

    def test_a_time_cap_pauses_the_engine_and_the_owner_raises_it(
        self, world: World, engine: str
    ) -> None:
        """At the cap the engine's next model request waits while the owner is asked; raised,
        the same session goes on (the model's next request holds the earlier tool result)."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Capped work")
        shell = Shell("echo capped-work-ran > CAPPED.md && sleep 4")
        with models(shell, Text("All done.")) as server:
            folder = world.on(
                engine,
                number,
                server,
                caps=Caps(minutes=0.03),
                stall_timeout_s=4,
                ask_timeout_s=60,
            )
            answered: list[str] = []
            held: list[int] = []

            def answer_every_cap_question() -> None:
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    lines, _, _ = folder.progress()
                    if any(line.final for line in lines):
                        return
                    for line in lines:
                        q = line.question
                        if q is not None and q.id not in answered:
                            if not answered:  # the shell ends; its result waits with Claude
                                time.sleep(5)
                                before = len(server.model_requests())
                                time.sleep(1)
                                held.append(len(server.model_requests()) - before)
                            answered.append(q.id)
                            raise_it = next(o for o in q.options if o.startswith("raise"))
                            deliver(folder, q.id, raise_it)
                    time.sleep(0.1)

            owner = threading.Thread(target=answer_every_cap_question)
            owner.start()
            code, lines = world.run(folder)
            owner.join()
            asked_model = len(server.model_requests())
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        assert answered, "no cap question was asked"
        asked = [line.question for line in lines if line.question is not None]
        assert asked and all(q.cap for q in asked), "a cap's question says it is one"
        assert held == [0], "a model request went out while the owner was asked"
        assert asked_model >= 3  # the turn before the pause, after it, and the review
        paused = [line.text for line in lines if line.text.startswith("paused: ")]
        assert paused and "time cap of 0.03 minutes" in paused[0]
        assert any("the owner raised the cap" in line.text for line in lines)
        [pull] = gh.pull_requests("owner/app")
        assert pull.pull is not None and not pull.pull.draft

    def test_a_cap_nobody_answers_saves_a_draft_that_names_it(
        self, world: World, engine: str
    ) -> None:
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Capped work")
        hang = Hang()
        # The cap falls in the tool's sleep, after WIP.md is written however long the engine
        # takes to start (a few seconds under load).
        with models(Shell("echo wip > WIP.md && sleep 12"), hang) as server:
            folder = world.on(
                engine,
                number,
                server,
                caps=Caps(minutes=0.12),
                stall_timeout_s=20,
                ask_timeout_s=2,
            )
            code, lines = world.run(folder)
            hang.release()
        final = lines[-1]
        assert (code, final.outcome) == (0, Outcome.STOPPED)
        [answer] = [line.answer for line in lines if line.answer is not None]
        assert (answer.choice, answer.chosen_by.value) == ("finish now", "timeout")
        assert final.report is not None and "time cap of 0.12 minutes" in final.report
        assert gh.read_file("owner/app", "shadowclone/1-capped-work", "WIP.md") == "wip\n"
        [pull] = gh.pull_requests("owner/app")
        assert pull.pull is not None and pull.pull.draft
        assert final.pr_url == f"{gh.url}/owner/app/pull/{pull.number}"


class TestPrices:
    engine_binaries = ("codex",)

    def test_codex_usage_is_priced_from_the_providers_prices(self, world: World) -> None:
        """Codex reports tokens but no cost: the provider's prices make its cost (here a
        dollar a token), for the report and for the cost caps."""
        gh = world.github
        number = gh.create_issue("owner/app", author="owner", title="Priced work")
        with models(Shell("echo one > ONE.md"), Text("Done.")) as server:
            folder = world.on(
                "codex",
                number,
                server,
                price=Price(1e6, 1e6),
            )
            code, lines = world.run(folder)
        assert (code, lines[-1].outcome) == (0, Outcome.DONE)
        usages = [line.usage for line in lines if line.usage is not None]
        assert usages
        assert all(u.cost_usd == u.input_tokens + u.output_tokens for u in usages)
        total = sum(u.cost_usd or 0 for u in usages)
        assert f"${total:.4f}" in (lines[-1].report or "")
