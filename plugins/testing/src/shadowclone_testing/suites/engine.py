"""One scenario suite for every engine, run against the real CLI and the fake model server.

An engine's test module subclasses `EngineScenarios`, names the programs it needs and says how
to build its `Engine` and the provider environment that points it at the fake server:

    class TestClaude(EngineScenarios):
        engine_binaries = ("claude",)

        def make_engine(self) -> Engine: ...
        def provider_env(self, server: FakeModelServer) -> dict[str, str]: ...

An engine that can start before its workspace exists (`StartsEarly`) subclasses
`EarlyStartScenarios` instead, which adds the early start's scenarios.

The scenarios: a turn that runs a shell command and ends; a message sent mid-turn
reaches the model in the same session and the clone goes on; the ask tool of the real
`shadowclone_ask` server puts a question in the run folder's progress lines and returns the
owner's delivered answer to the model, or the recommended option once its wait limit passes;
stop during a turn ends the whole process tree within seconds; the engine process dying mid-turn
gives a failed outcome with its last output. Each scenario scripts the fake server, launches a
session on a fresh git workspace and follows the session's events with `Watch`.

A subclass also says, through its driver's own helpers, how long the engine lets one call of
the ask tool run (`ask_tool_timeout_s`), so that a 30-minute question is never cut short.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import attrs
import psutil
import pytest
from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import (
    Answer,
    ChosenBy,
    InboxKind,
    InboxLine,
    ProgressKind,
    ProgressLine,
    Question,
)
from shadowclone.plugin import Refused
from shadowclone.plugin.types import (
    Engine,
    EngineEvent,
    EngineLimits,
    EngineSession,
    EngineTask,
    FinishedEvent,
    KeepsSessions,
    Outcome,
    StartsEarly,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)
from shadowclone.redact import Redactor
from shadowclone.run.ask import DEFAULT_TIMEOUT_S, SERVER_NAME, TOOL_NAME, ask_command
from shadowclone.run.ask.http import AskService

from shadowclone_testing.fakes.models import (
    CallTool,
    FakeModelServer,
    ModelRequest,
    Shell,
    Text,
)
from shadowclone_testing.project_settings import markers_left
from shadowclone_testing.suites.ask_stand_in import ANSWER_PREFIX

log = logging.getLogger(__name__)

TURN_TIMEOUT_S = 120.0
"""Generous bound on one scripted turn, so a broken driver fails instead of hanging."""
STOP_TIMEOUT_S = 15.0
"""`stop()` must end the process tree "within seconds"; this only prevents a hang."""

STAND_IN_ASK_SERVER = Path(__file__).with_name("ask_stand_in.py")

ASK_TOOL = f"mcp__{SERVER_NAME}__{TOOL_NAME}"
"""The ask tool as both drivers name it in a `ToolUseEvent`."""
SHORT_ASK_TIMEOUT_S = 4.0
"""The wait limit of the timeout scenario: a few seconds, so the recommended option is taken."""
LONG_ASK_TIMEOUT_S = 600.0
"""The wait limit where the owner answers: far longer than the scenario takes."""
ASK_TOOL_TIMEOUT_MARGIN_S = 30.0
"""How much longer than the ask's wait limit the engine must let the tool call run: the ask
server answers only after writing its answer line, and the engine's clock starts first."""

E = TypeVar("E", bound=EngineEvent)


# --------------------------------------------------------------------------- helpers


class Watch:
    """Follows one session's events in the background so a test can wait for them in order."""

    def __init__(self, session: EngineSession) -> None:
        self.session = session
        self.events: list[EngineEvent] = []
        self.ended = False
        self._cursor = 0
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            async for event in self.session.events():
                log.info("engine event: %r", event)
                async with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self.ended = True
                self._changed.notify_all()

    async def next(
        self,
        kind: type[E],
        where: Callable[[E], bool] = lambda _event: True,
        timeout: float = TURN_TIMEOUT_S,
    ) -> E:
        """The next event of `kind` (after the last one this returned) for which `where` holds."""
        async with asyncio.timeout(timeout), self._changed:
            while True:
                while self._cursor < len(self.events):
                    event = self.events[self._cursor]
                    self._cursor += 1
                    if isinstance(event, kind) and where(event):
                        return event
                if self.ended:
                    raise AssertionError(
                        f"the session ended without a matching {kind.__name__}: {self.events}"
                    )
                await self._changed.wait()

    async def turn_ended(self, timeout: float = TURN_TIMEOUT_S) -> TurnEndedEvent:
        """The next turn that ended on its own (not by an interrupt)."""
        return await self.next(TurnEndedEvent, lambda event: not event.interrupted, timeout)

    async def finished(self, timeout: float = TURN_TIMEOUT_S) -> FinishedEvent:
        return await self.next(FinishedEvent, timeout=timeout)

    def seen(self, kind: type[E]) -> list[E]:
        """Every event of `kind` so far."""
        return [event for event in self.events if isinstance(event, kind)]

    def texts(self) -> str:
        return "\n".join(event.text for event in self.seen(TextEvent))

    async def aclose(self) -> None:
        """Stop the session if it still runs and let the drain finish."""
        if not self.ended:
            await asyncio.wait_for(self.session.stop(), STOP_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
        if not self._task.done():
            self._task.cancel()


@attrs.define
class Harness:
    """One scenario's world: the engine, the fake model server, a git workspace, a state dir."""

    engine: Engine
    server: FakeModelServer
    workspace: Path
    state_dir: Path
    env: dict[str, str]
    ask_command: tuple[str, ...]
    run_folder: RunFolder
    """Where the real ask server writes its progress lines and reads delivered answers."""
    watches: list[Watch] = attrs.field(factory=list)
    ask_service: AskService | None = None

    def task(self, prompt: str, **changes: Any) -> EngineTask:
        task = EngineTask(
            workspace=self.workspace,
            prompt=prompt,
            ask_command=self.ask_command,
            env=self.env,
            state_dir=self.state_dir,
        )
        return attrs.evolve(task, **changes)

    async def launch(self, prompt: str, **changes: Any) -> Watch:
        session = await self.engine.launch(self.task(prompt, **changes))
        watch = Watch(session)
        self.watches.append(watch)
        return watch

    async def launch_with_ask_server(
        self, prompt: str, ask_timeout_s: float, transport: str = "http"
    ) -> Watch:
        """Launch with the real `shadowclone_ask` server on this run folder, waiting at most
        `ask_timeout_s` for each answer, and the engine told the same limit: served over HTTP
        from this process, as the run program does it, or (`transport="stdio"`) started by the
        engine from `ask_command`, the way left when that server cannot start."""
        changes: dict[str, Any] = {
            "ask_command": ask_command(self.run_folder.path, ask_timeout_s),
            "limits": EngineLimits(ask_timeout_s=ask_timeout_s),
        }
        if transport == "http":
            self.ask_service = AskService(self.run_folder, Redactor(()), ask_timeout_s)
            await self.ask_service.start()
            changes.update(ask_url=self.ask_service.url, ask_headers=self.ask_service.headers)
        return await self.launch(prompt, **changes)

    async def wait_for_request(
        self, where: Callable[[ModelRequest], bool], timeout: float = TURN_TIMEOUT_S
    ) -> ModelRequest:
        return await asyncio.to_thread(self.server.wait_for, where, timeout)

    async def aclose(self) -> None:
        for watch in self.watches:
            await watch.aclose()
        if self.ask_service is not None:
            await self.ask_service.close()


SEND_TO_MODEL: dict[str, float] = {}
"""Seconds from `send` to the model's first request carrying the message, by engine and state:
printed as each is measured (a figure, never asserted)."""


async def send_and_time(harness: Harness, watch: Watch, message: str, what: str) -> None:
    """Send `message` and record how long it took to reach the model, exactly once."""
    started = time.monotonic()
    await watch.session.send(message)
    await harness.wait_for_request(lambda request: request.last_user_text() == message)
    SEND_TO_MODEL[what] = time.monotonic() - started
    print(f"send -> model request, {what}: {SEND_TO_MODEL[what] * 1000:.0f} ms")
    carrying = [r for r in harness.server.model_requests() if r.contains(message)]
    assert all(r.user_texts().count(message) == 1 for r in carrying), "the message came twice"


def git_workspace(path: Path) -> Path:
    """A git repository with one commit, as a clone's checkout would be."""
    path.mkdir(parents=True)
    git = ["git", "-c", "user.name=Clone", "-c", "user.email=clone@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "README.md").write_text("# sample\n")
    subprocess.run([*git, "add", "README.md"], cwd=path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial"], cwd=path, check=True)
    return path


def odd_sleep(seconds: int) -> str:
    """A `sleep` command of `seconds` and an odd fraction of one, drawn anew: its command line
    marks its process among all the machine's, never one another test (or another test run
    beside this one) started. Claude Code refuses a bare `sleep N`."""
    return f"sleep {seconds}.{100000 + secrets.randbelow(900000)}"


def processes_running(marker: str) -> list[psutil.Process]:
    """Live (not zombie) processes anywhere on the machine whose command line holds `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or ())
        if marker in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


async def wait_for_process(marker: str, timeout: float = TURN_TIMEOUT_S) -> list[psutil.Process]:
    """Wait until a process whose command line holds `marker` runs."""
    async with asyncio.timeout(timeout):
        while not (found := processes_running(marker)):
            await asyncio.sleep(0.1)
    return found


def progress_lines(folder: RunFolder, kind: ProgressKind) -> list[ProgressLine]:
    """The run folder's progress lines of `kind`; every line must parse."""
    lines, problems, _ = folder.progress()
    assert problems == [], problems
    return [line for line in lines if line.kind is kind]


async def wait_for_progress(
    folder: RunFolder, kind: ProgressKind, timeout: float = TURN_TIMEOUT_S
) -> ProgressLine:
    """The first progress line of `kind`, once the run folder has one."""
    async with asyncio.timeout(timeout):
        while not (lines := progress_lines(folder, kind)):
            await asyncio.sleep(0.1)
    return lines[0]


async def wait_for_progress_lines(
    folder: RunFolder, kind: ProgressKind, timeout: float = TURN_TIMEOUT_S
) -> list[ProgressLine]:
    async with asyncio.timeout(timeout):
        while not (found := progress_lines(folder, kind)):
            await asyncio.sleep(0.05)
    return found


def deliver_answer(folder: RunFolder, question_id: str, choice: str) -> None:
    """What serve does with the owner's answer: append it to the run folder's deliveries."""
    line = InboxLine(id="i1", kind=InboxKind.ANSWER, text=choice, question_id=question_id)
    files.append_line(folder.deliveries_file, schemas.dumps(line))


def engine_processes(before: set[int]) -> list[psutil.Process]:
    """Children of this test process started since `before` was taken, with their descendants."""
    roots = [child for child in psutil.Process().children() if child.pid not in before]
    found = list(roots)
    for root in roots:
        with contextlib.suppress(psutil.NoSuchProcess):  # gone meanwhile: nothing below it
            found += root.children(recursive=True)
    return found


# --------------------------------------------------------------------------- the suite


class EngineScenarios(abc.ABC):
    """The scenario suite. Subclass it as `Test<Engine>` and implement the abstract methods."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.engines, pytest.mark.anyio]

    engine_binaries: ClassVar[tuple[str, ...]]
    """The CLIs the engine runs, looked up in tools/engines (the fixture `sc_engines_on_path`)."""

    @abc.abstractmethod
    def make_engine(self) -> Engine:
        """The engine under test, built the way the core builds it (its registration factory)."""

    @abc.abstractmethod
    def provider_env(self, server: FakeModelServer) -> dict[str, str]:
        """The variables that point the engine at `server` and log it in (a fake key)."""

    def state(self, what: str) -> str:
        """`what` the engine was doing, named with the engine, for the send-to-model figures."""
        return f"{self.engine_binaries[0]}, {what}"

    def ask_command(self) -> tuple[str, ...]:
        """argv of the `shadowclone_ask` MCP server the scenarios give the engine by default
        (the ask scenarios start the real one through `Harness.launch_with_ask_server`)."""
        return (sys.executable, str(STAND_IN_ASK_SERVER))

    def ask_tool_timeout_s(self, task: EngineTask) -> float:
        """How long the engine lets one call of the ask tool run for `task`, read through the
        driver's own helpers (the environment or config file it builds). Every engine's test
        module says it; this default fails the check so that none forgets."""
        pytest.fail(
            f"{type(self).__name__} does not say how long its engine lets the ask tool run: "
            "override ask_tool_timeout_s with the driver's own helpers"
        )

    def plant_project_settings(self, workspace: Path, markers: Path) -> None:
        """Write into `workspace` the engine's own project settings (hooks, MCP servers...) that
        would each run a command leaving a file in `markers` if the engine loaded them: the
        files a stranger's pull request could add. Every engine's test module says it; this
        default fails the check so that none forgets."""
        pytest.fail(
            f"{type(self).__name__} does not say what project settings its engine loads: "
            "override plant_project_settings with files that would run a command"
        )

    # ---- fixtures

    @pytest.fixture
    def anyio_backend(self) -> str:
        """The drivers use asyncio subprocesses."""
        return "asyncio"

    @pytest.fixture
    def model_server(self) -> Iterator[FakeModelServer]:
        with FakeModelServer() as server:
            yield server

    @pytest.fixture
    async def harness(
        self, sc_engines_on_path: Path, model_server: FakeModelServer, tmp_path: Path
    ) -> AsyncIterator[Harness]:
        harness = Harness(
            engine=self.make_engine(),
            server=model_server,
            workspace=git_workspace(tmp_path / "workspace"),
            state_dir=tmp_path / "state",
            # A home of its own, as the run program gives the engine: the shell tools must not
            # run this machine's login shell setup (pyenv's rehash takes a lock, and a killed
            # command leaves it behind for every later shell).
            env={**self.provider_env(model_server), "HOME": str(tmp_path / "home")},
            ask_command=self.ask_command(),
            run_folder=RunFolder(tmp_path / "run"),
        )
        harness.state_dir.mkdir()
        harness.run_folder.path.mkdir()
        (tmp_path / "home").mkdir()
        try:
            yield harness
        finally:
            await harness.aclose()

    # ---- one turn

    async def test_a_turn_runs_a_shell_command_and_ends(self, harness: Harness) -> None:
        harness.server.add(Shell("echo hello > out.txt"), Text("I wrote out.txt."))

        watch = await harness.launch("Write hello into out.txt.")
        await watch.turn_ended()

        assert (harness.workspace / "out.txt").read_text() == "hello\n"
        assert any("out.txt" in event.detail for event in watch.seen(ToolUseEvent))
        assert "I wrote out.txt." in watch.texts()
        assert watch.seen(UsageEvent), "no usage reported for the turn"
        first, second = harness.server.model_requests()
        assert first.last_user_text() == "Write hello into out.txt."
        assert second.tool_results(), "the shell command's output never reached the model"

        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    async def test_without_project_settings_the_workspace_s_settings_run_nothing(
        self, harness: Harness, tmp_path: Path
    ) -> None:
        """`project_settings=False` (a head that is not the owner's): none of the workspace's
        hooks or MCP servers runs, through a whole session with a tool call, and the ask
        server is still offered."""
        markers = tmp_path / "markers"
        markers.mkdir()
        self.plant_project_settings(harness.workspace, markers)
        harness.server.add(Shell("echo looked"), Text("Looked."))

        watch = await harness.launch("Look at the repository.", project_settings=False)
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        assert markers_left(markers) == []
        assert any(SERVER_NAME in tool for tool in harness.server.model_requests()[0].tool_names())

    async def test_a_message_after_the_end_is_refused(self, harness: Harness) -> None:
        harness.server.add(Text("Done."))

        watch = await harness.launch("Say done.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

        with pytest.raises(Refused):
            await watch.session.send("Too late.")

    async def test_a_message_between_turns_starts_the_next_turn(self, harness: Harness) -> None:
        harness.server.add(Text("First answer."), Text("Second answer."))

        watch = await harness.launch("First task.")
        await watch.turn_ended()
        await watch.session.send("Second task.")
        await watch.turn_ended()

        assert "Second answer." in watch.texts()
        last = harness.server.model_requests()[-1]
        assert last.last_user_text() == "Second task."
        assert last.contains("First task."), "the second turn is not in the same session"
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_close_during_a_turn_lets_the_turn_finish(self, harness: Harness) -> None:
        harness.server.add(Text("one two three four five six seven eight", chunk_delay_s=0.2))

        watch = await harness.launch("Count to eight.")
        await harness.wait_for_request(lambda request: True)
        await watch.session.close()

        await watch.turn_ended()
        assert "one two three four five six seven eight" in watch.texts()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    # ---- messages during a turn

    MESSAGE = "Owner says: also add a CHANGELOG entry."

    def answer_the_message(self, harness: Harness) -> None:
        """From the moment the owner's message reaches the model, it answers "Heard you"."""
        harness.server.rule = lambda request: (
            Text("Heard you.") if request.contains(self.MESSAGE) else None
        )

    async def test_a_message_while_the_model_streams_reaches_it(self, harness: Harness) -> None:
        harness.server.add(Text("word " * 400, chunk_delay_s=0.2))
        self.answer_the_message(harness)

        watch = await harness.launch("Write a long essay.")
        await harness.wait_for_request(lambda request: True)
        await send_and_time(harness, watch, self.MESSAGE, self.state("the model streaming"))
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()

        request = harness.server.wait_for_text(self.MESSAGE, timeout=1)
        assert request.last_user_text() == self.MESSAGE
        assert request.contains("Write a long essay."), "the message went to another session"
        await self.the_clone_goes_on(harness, watch)

    async def test_a_message_while_a_tool_runs_reaches_the_model(self, harness: Harness) -> None:
        # The odd duration marks the process to look for.
        sleep = odd_sleep(30)
        harness.server.add(Shell(f"echo started && {sleep} && echo over"))
        self.answer_the_message(harness)

        watch = await harness.launch("Run the slow build.")
        await watch.next(ToolUseEvent)
        await wait_for_process(sleep)
        await send_and_time(harness, watch, self.MESSAGE, self.state("a tool running"))
        # It reached the model before the 30 s command could end: no output of its end.
        assert not any(
            "over" in result
            for request in harness.server.model_requests()
            for result in request.tool_results()
        )
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()

        request = harness.server.wait_for_text(self.MESSAGE, timeout=1)
        assert request.last_user_text() == self.MESSAGE
        assert request.contains("Run the slow build."), "the message went to another session"
        await self.the_clone_goes_on(harness, watch)

    async def test_two_quick_messages_mid_turn_both_reach_the_model(self, harness: Harness) -> None:
        harness.server.add(Text("word " * 400, chunk_delay_s=0.2))
        second = "Owner says: and bump the version."
        harness.server.rule = lambda request: (
            Text("Heard both.")
            if request.contains(self.MESSAGE) and request.contains(second)
            else None
        )

        watch = await harness.launch("Write a long essay.")
        await harness.wait_for_request(lambda request: True)
        await watch.session.send(self.MESSAGE)
        await watch.session.send(second)
        await watch.next(TextEvent, lambda event: "Heard both." in event.text)
        await watch.turn_ended()

        assert harness.server.saw_text(self.MESSAGE)
        assert harness.server.saw_text(second)
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def the_clone_goes_on(self, harness: Harness, watch: Watch) -> None:
        """After a message the session still works: another turn, then a clean end."""
        harness.server.rule = None
        harness.server.add(Shell("echo more > more.txt"), Text("Went on."))
        await watch.session.send("Now write more.txt.")
        await watch.next(TextEvent, lambda event: "Went on." in event.text)
        await watch.turn_ended()
        assert (harness.workspace / "more.txt").read_text() == "more\n"
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    # ---- the shadowclone_ask MCP server slot

    async def test_an_mcp_tool_call_reaches_the_ask_server(self, harness: Harness) -> None:
        """The ask server is wired in under the name `shadowclone_ask`, and its tool's result
        comes back to the model (here the stand-in server; the ask scenarios follow below)."""
        harness.server.add(
            CallTool(
                "shadowclone_ask",
                "ask",
                {"question": "Squash?", "options": ["yes", "no"], "recommended": "no"},
            ),
            Text("Asked."),
        )

        watch = await harness.launch("Ask the owner whether to squash.")
        await watch.turn_ended()

        results = harness.server.model_requests()[-1].tool_results()
        assert any(f"{ANSWER_PREFIX}no" in result for result in results), results
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    # ---- the ask tool (the real `shadowclone.run.ask` server)

    QUESTION = "Drop the old migrations?"
    ASKED: ClassVar[dict[str, Any]] = {
        "question": QUESTION,
        "options": ["keep them", "drop them"],
        "recommended": "keep them",
    }

    async def test_a_question_reaches_the_owner_and_the_answer_reaches_the_model(
        self, harness: Harness
    ) -> None:
        harness.server.add(CallTool(SERVER_NAME, TOOL_NAME, self.ASKED), Text("Dropped them."))
        folder = harness.run_folder

        watch = await harness.launch_with_ask_server(
            "Clean up the migrations.", ask_timeout_s=LONG_ASK_TIMEOUT_S
        )
        asked = await wait_for_progress(folder, ProgressKind.QUESTION)

        assert asked.question == Question(
            id="q1",
            text=self.QUESTION,
            options=("keep them", "drop them"),
            recommended="keep them",
            timeout_s=LONG_ASK_TIMEOUT_S,
        )
        # The engine waits for the owner: no answer is settled and no tool result went back.
        assert progress_lines(folder, ProgressKind.ANSWER) == []
        assert not any(request.tool_results() for request in harness.server.model_requests())

        deliver_answer(folder, "q1", "drop them")
        await watch.turn_ended()

        (answered,) = progress_lines(folder, ProgressKind.ANSWER)
        assert answered.answer == Answer("q1", "drop them", ChosenBy.OWNER)
        results = harness.server.model_requests()[-1].tool_results()
        assert any(
            "The owner answered your question (q1): drop them" in result for result in results
        ), results
        assert "Dropped them." in watch.texts()
        (ask_use,) = [event for event in watch.seen(ToolUseEvent) if event.name == ASK_TOOL]
        assert self.QUESTION in ask_use.detail
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    async def test_a_message_while_a_question_is_open_reaches_the_model_at_once(
        self, harness: Harness
    ) -> None:
        """The open question is withdrawn and the model gets the owner's message now, not
        after the question's wait limit."""
        harness.server.add(CallTool(SERVER_NAME, TOOL_NAME, self.ASKED))
        self.answer_the_message(harness)
        folder = harness.run_folder

        watch = await harness.launch_with_ask_server(
            "Clean up the migrations.", ask_timeout_s=LONG_ASK_TIMEOUT_S
        )
        await wait_for_progress(folder, ProgressKind.QUESTION)
        await send_and_time(harness, watch, self.MESSAGE, self.state("a question open"))
        await watch.next(TextEvent, lambda event: "Heard you." in event.text)
        await watch.turn_ended()
        (settled,) = await wait_for_progress_lines(folder, ProgressKind.ANSWER)
        assert settled.answer is not None
        assert settled.answer.chosen_by is ChosenBy.WITHDRAWN, settled
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE

    async def test_an_unanswered_question_takes_the_recommended_option(
        self, harness: Harness
    ) -> None:
        harness.server.add(CallTool(SERVER_NAME, TOOL_NAME, self.ASKED), Text("Kept them."))
        folder = harness.run_folder

        watch = await harness.launch_with_ask_server(
            "Clean up the migrations.", ask_timeout_s=SHORT_ASK_TIMEOUT_S, transport="stdio"
        )
        await watch.turn_ended()

        (asked,) = progress_lines(folder, ProgressKind.QUESTION)
        assert asked.question is not None
        assert asked.question.id == "q1"
        assert asked.question.timeout_s == SHORT_ASK_TIMEOUT_S
        (answered,) = progress_lines(folder, ProgressKind.ANSWER)
        assert answered.answer == Answer("q1", "keep them", ChosenBy.TIMEOUT)
        results = harness.server.model_requests()[-1].tool_results()
        (told,) = [result for result in results if "did not answer" in result]
        assert "your recommended option was taken: keep them" in told
        assert "skip every destructive step" in told
        assert "Kept them." in watch.texts()
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    @pytest.mark.parametrize("ask_timeout_s", [DEFAULT_TIMEOUT_S, 2 * 60 * 60.0])
    async def test_the_engine_lets_an_ask_wait_its_whole_limit(
        self, tmp_path: Path, ask_timeout_s: float
    ) -> None:
        """The engine's own MCP tool timeout, as the driver configures it, outlasts the ask's
        wait limit: the 30-minute default and a longer one."""
        task = EngineTask(
            workspace=tmp_path,
            prompt="Ask the owner.",
            ask_command=ask_command(tmp_path / "run", ask_timeout_s),
            env={},
            state_dir=tmp_path / "state",
            limits=EngineLimits(ask_timeout_s=ask_timeout_s),
        )
        assert self.ask_tool_timeout_s(task) >= ask_timeout_s + ASK_TOOL_TIMEOUT_MARGIN_S

    # ---- stop and crash

    async def test_stop_during_a_turn_ends_the_process_tree(self, harness: Harness) -> None:
        sleep = odd_sleep(987)
        harness.server.add(Shell(f"echo started && {sleep} && echo over"))
        before = {child.pid for child in psutil.Process().children()}

        watch = await harness.launch("Run the endless job.")
        await watch.next(ToolUseEvent)
        await wait_for_process(sleep)
        tree = engine_processes(before)
        assert tree, "no engine process found"

        await asyncio.wait_for(watch.session.stop(), STOP_TIMEOUT_S)
        finished = await watch.finished(timeout=STOP_TIMEOUT_S)

        assert finished.outcome is Outcome.STOPPED
        _gone, alive = psutil.wait_procs(still_running(tree), timeout=5)
        assert not alive, f"left running after stop: {alive}"
        assert not processes_running(sleep), "the tool's process outlived the engine"

    async def test_the_engine_dying_mid_turn_fails_with_its_last_output(
        self, harness: Harness
    ) -> None:
        sleep = odd_sleep(986)
        harness.server.add(Shell(f"echo started && {sleep} && echo over"))
        before = {child.pid for child in psutil.Process().children()}

        watch = await harness.launch("Run the endless job.")
        await watch.next(ToolUseEvent)
        await wait_for_process(sleep)
        roots = [child for child in psutil.Process().children() if child.pid not in before]
        assert len(roots) == 1, roots
        roots[0].send_signal(signal.SIGKILL)
        finished = await watch.finished()

        assert finished.outcome is Outcome.FAILED
        assert sleep.removeprefix("sleep ") in finished.detail, finished.detail
        async with asyncio.timeout(STOP_TIMEOUT_S):
            while processes_running(sleep):
                await asyncio.sleep(0.1)


class EarlyStartScenarios(EngineScenarios):
    """The scenarios of an engine that can also start before its workspace exists
    (`StartsEarly`): subclass this instead of `EngineScenarios`. The run program starts such an
    engine while it still reads the target and clones the workspace, then launches the task in
    the program already running."""

    def starts_early(self, harness: Harness) -> StartsEarly:
        engine = harness.engine
        assert isinstance(engine, StartsEarly), f"{type(engine).__name__} does not start early"
        return engine

    async def test_an_early_start_works_in_the_workspace_made_after_it(
        self, harness: Harness
    ) -> None:
        later = harness.workspace.parent / "made-later"
        early_task = harness.task("", workspace=later)
        early = await self.starts_early(harness).start_early(early_task)
        # What the run program does meanwhile: the checkout appears where the task said.
        subprocess.run(["git", "clone", "-q", str(harness.workspace), str(later)], check=True)
        (later / "MADE-LATER.txt").write_text("written after the engine started\n")
        harness.server.add(Shell("cat MADE-LATER.txt && pwd"), Text("Read it."))

        watch = Watch(await early.launch(attrs.evolve(early_task, prompt="Read MADE-LATER.txt.")))
        harness.watches.append(watch)
        await watch.turn_ended()

        first, second = harness.server.model_requests()
        assert first.last_user_text() == "Read MADE-LATER.txt."
        results = "\n".join(second.tool_results())
        assert "written after the engine started" in results, results
        assert str(later.resolve()) in results, results
        await watch.session.close()
        finished = await watch.finished()
        assert finished.outcome is Outcome.DONE, finished.detail

    async def test_an_early_start_discarded_leaves_no_process(self, harness: Harness) -> None:
        before = {child.pid for child in psutil.Process().children()}
        early_task = harness.task("", workspace=harness.workspace.parent / "never-made")
        early = await self.starts_early(harness).start_early(early_task)
        tree = engine_processes(before)
        assert tree, "no engine process found"

        await asyncio.wait_for(early.discard(), STOP_TIMEOUT_S)

        _gone, alive = psutil.wait_procs(still_running(tree), timeout=5)
        assert not alive, f"left running after discard: {alive}"
        assert harness.server.model_requests() == []

    @pytest.mark.parametrize("when", ["at once", "once its process runs"])
    async def test_a_cancelled_early_start_leaves_no_process(
        self, harness: Harness, when: str
    ) -> None:
        """The run program cancels a start still under way when the clone ends first (a stop,
        a failed target): whenever the cancel comes, no process of the engine's is left once
        the cancelled start returns. A start that ended before the cancel came is discarded
        instead, as the run program does."""
        before = {child.pid for child in psutil.Process().children()}
        early_task = harness.task("", workspace=harness.workspace.parent / "never-made")
        starting = asyncio.ensure_future(self.starts_early(harness).start_early(early_task))
        if when != "at once":
            async with asyncio.timeout(STOP_TIMEOUT_S):
                while not engine_processes(before) and not starting.done():
                    await asyncio.sleep(0.005)
        starting.cancel()
        async with asyncio.timeout(STOP_TIMEOUT_S):
            (started,) = await asyncio.gather(starting, return_exceptions=True)
        if not isinstance(started, BaseException):
            await asyncio.wait_for(started.discard(), STOP_TIMEOUT_S)
        elif not isinstance(started, asyncio.CancelledError):
            raise started

        _gone, alive = psutil.wait_procs(still_running(engine_processes(before)), timeout=5)
        assert not alive, f"left running after the cancelled start: {alive}"
        assert harness.server.model_requests() == []

    async def test_a_task_that_changed_since_the_early_start_is_launched_anew(
        self, harness: Harness
    ) -> None:
        """The early program was started for one environment; the task launched says another:
        the engine works with the task's, and the early program is gone."""
        before = {child.pid for child in psutil.Process().children()}
        early_task = harness.task("", env={**harness.env, "SHADOWCLONE_EARLY_MARK": "early"})
        early = await self.starts_early(harness).start_early(early_task)
        tree = engine_processes(before)
        harness.server.add(Shell("echo mark=$SHADOWCLONE_EARLY_MARK"), Text("Shown."))

        task = attrs.evolve(
            early_task,
            prompt="Show the mark.",
            env={**harness.env, "SHADOWCLONE_EARLY_MARK": "launched"},
        )
        watch = Watch(await early.launch(task))
        harness.watches.append(watch)
        await watch.turn_ended()

        results = "\n".join(harness.server.model_requests()[1].tool_results())
        assert "mark=launched" in results, results
        _gone, alive = psutil.wait_procs(still_running(tree), timeout=5)
        assert not alive, f"the early program outlived the new launch: {alive}"
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE


class SessionScenarios(EngineScenarios):
    """The scenarios of an engine whose session a later clone goes on with (`KeepsSessions`):
    add this to the test class's bases. The run program copies the files the engine names
    into another clone's state folder, where the engine says, and resumes the session there,
    in another workspace."""

    def keeps_sessions(self, harness: Harness) -> KeepsSessions:
        engine = harness.engine
        assert isinstance(engine, KeepsSessions), f"{type(engine).__name__} keeps no session"
        return engine

    async def test_a_session_goes_on_in_another_state_folder_and_workspace(
        self, harness: Harness
    ) -> None:
        engine = self.keeps_sessions(harness)
        harness.server.add(Shell("echo remembered-output"), Text("First part done."))
        watch = await harness.launch("Do the first part.")
        await watch.turn_ended()
        await watch.session.close()
        assert (await watch.finished()).outcome is Outcome.DONE
        session_id = watch.session.session_id
        assert session_id, "the session has no id to resume"
        names = engine.session_files(harness.task(""), session_id)
        assert names, "the engine named no file of its session"

        later = harness.task(
            "Do the second part.",
            workspace=git_workspace(harness.workspace.parent / "later-workspace"),
            state_dir=harness.workspace.parent / "later-state",
            resume=session_id,
        )
        later.state_dir.mkdir()
        for name in names:
            files.relative_parts(name)  # a plain path inside the state folder
            data = (harness.state_dir / name).read_bytes()
            files.write_beneath(
                later.state_dir, engine.session_place(later, session_id, name), data
            )
        before = len(harness.server.model_requests())
        harness.server.add(Text("Second part done."))
        resumed = Watch(await harness.engine.launch(later))
        harness.watches.append(resumed)
        await resumed.turn_ended()

        first = harness.server.model_requests()[before]
        assert first.last_user_text() == "Do the second part."
        assert first.contains("Do the first part.") and first.contains("remembered-output")
        assert resumed.session.session_id == session_id
        assert "Second part done." in resumed.texts()
