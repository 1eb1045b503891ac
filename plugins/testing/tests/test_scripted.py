"""The scripted engine, on a real git workspace, with the real `shadowclone_ask` server started
from `ask_command()` and answered through `deliveries.jsonl` as serve would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import attrs
import psutil
import pytest
from shadowclone import files
from shadowclone.node import schemas
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ChosenBy, InboxKind, InboxLine, ProgressKind, ProgressLine
from shadowclone.plugin import (
    BadInput,
    EngineTask,
    Outcome,
    Refused,
    TextEvent,
    ToolUseEvent,
    TurnEndedEvent,
    UsageEvent,
)
from shadowclone.run.ask import ask_command
from shadowclone.run.drive import supervise_engine
from shadowclone.run.inbox import delivered
from shadowclone.run.progress import ProgressWriter
from shadowclone_testing import shadowclone_engines
from shadowclone_testing.scripted import (
    ASK_TOOL,
    NOTES_FILE,
    SCRIPT_VARIABLE,
    Ask,
    Fail,
    Run,
    Say,
    ScriptedEngine,
    Sleep,
    WaitForMessage,
    Write,
    default_script,
    parse_script,
    script_json,
)
from shadowclone_testing.suites.engine import Watch, git_workspace, odd_sleep, processes_running

pytestmark = pytest.mark.anyio

BOUND_S = 30.0
"""A generous bound that turns a hang into a failure; no test depends on speed."""

PROMPT = "# Add a greeting for new contributors\n\nThey should feel welcome."


@attrs.define
class World:
    workspace: Path
    folder: RunFolder
    state_dir: Path
    watches: list[Watch] = attrs.field(factory=list)

    def task(self, ask_timeout_s: float = 600, env: Mapping[str, str] | None = None) -> EngineTask:
        return EngineTask(
            workspace=self.workspace,
            prompt=PROMPT,
            ask_command=ask_command(self.folder.path, ask_timeout_s),
            env=env or {},
            state_dir=self.state_dir,
        )

    async def launch(
        self, engine: ScriptedEngine | None = None, task: EngineTask | None = None
    ) -> Watch:
        session = await (engine or ScriptedEngine()).launch(task or self.task())
        watch = Watch(session)
        self.watches.append(watch)
        return watch

    def lines(self, kind: ProgressKind) -> list[ProgressLine]:
        lines, problems, _ = self.folder.progress()
        assert problems == []
        return [line for line in lines if line.kind is kind]

    async def question(self, number: int = 1) -> ProgressLine:
        """Wait until the ask server has written its `number`th question line."""
        async with asyncio.timeout(BOUND_S):
            while len(questions := self.lines(ProgressKind.QUESTION)) < number:
                await asyncio.sleep(0.05)
        return questions[number - 1]

    def deliver(self, line: InboxLine) -> None:
        """What serve does with the owner's answer or message."""
        files.append_line(self.folder.deliveries_file, schemas.dumps(line))

    def commits(self) -> int:
        done = subprocess.run(
            ["git", "rev-list", "--count", "HEAD"],
            cwd=self.workspace,
            capture_output=True,
            text=True,
            check=True,
        )
        return int(done.stdout)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    folder = tmp_path / "run"
    folder.mkdir()
    world = World(git_workspace(tmp_path / "workspace"), RunFolder(folder), tmp_path / "state")
    try:
        yield world
    finally:
        for watch in world.watches:
            await watch.aclose()


def ask_servers() -> list[psutil.Process]:
    """The ask servers this test process started (`env` execs python, so the run folder does
    not show in their command lines)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "shadowclone.run.ask" in " ".join(process.cmdline()):
                found.append(process)
    return found


# --------------------------------------------------------------------------- the default script


async def test_the_default_script_asks_and_follows_the_owners_answer(world: World) -> None:
    watch = await world.launch()

    asked = await world.question()
    assert asked.question is not None
    assert asked.question.options == ("formal", "friendly")
    assert asked.question.recommended == "friendly"
    assert "Add a greeting for new contributors" in (world.workspace / "GREETING.md").read_text()
    world.deliver(
        InboxLine(id="i1", kind=InboxKind.ANSWER, text="formal", question_id=asked.question.id)
    )
    await watch.turn_ended(timeout=BOUND_S)

    greeting = (world.workspace / "GREETING.md").read_text()
    assert "formal style" in greeting
    assert "Add a greeting for new contributors" in greeting
    assert "I read the issue: Add a greeting for new contributors" in watch.texts()
    assert "Done: GREETING.md now holds a formal greeting." in watch.texts()
    tools = [(event.name, event.detail) for event in watch.seen(ToolUseEvent)]
    assert ("write", "GREETING.md") in tools
    assert any(name == ASK_TOOL for name, _ in tools), tools
    assert watch.seen(UsageEvent)
    [answered] = world.lines(ProgressKind.ANSWER)
    assert answered.answer is not None
    assert (answered.answer.choice, answered.answer.chosen_by) == ("formal", ChosenBy.OWNER)
    assert world.commits() == 1, "the engine must leave committing to the run program"

    await watch.session.close()
    finished = await watch.finished(timeout=BOUND_S)
    assert finished.outcome is Outcome.DONE, finished.detail
    assert ask_servers() == [], "the ask server outlived its call"


async def test_with_no_answer_in_time_the_recommended_option_is_taken(world: World) -> None:
    watch = await world.launch(task=world.task(ask_timeout_s=0.5))
    await watch.turn_ended(timeout=BOUND_S)

    assert "friendly style" in (world.workspace / "GREETING.md").read_text()
    assert "I go with my recommendation: friendly" in watch.texts()
    [answered] = world.lines(ProgressKind.ANSWER)
    assert answered.answer is not None
    assert (answered.answer.choice, answered.answer.chosen_by) == ("friendly", ChosenBy.TIMEOUT)
    await watch.session.close()
    assert (await watch.finished(timeout=BOUND_S)).outcome is Outcome.DONE


# --------------------------------------------------------------------------- messages


async def test_a_message_mid_script_becomes_part_of_the_work(world: World) -> None:
    engine = ScriptedEngine(
        [Say("Starting."), WaitForMessage(BOUND_S), Write("out.txt", "{message}\n"), Say("Over.")]
    )
    watch = await world.launch(engine)
    await watch.next(TextEvent, lambda event: event.text == "Starting.", timeout=BOUND_S)
    await watch.session.send("Please also thank the reviewers.")
    await watch.turn_ended(timeout=BOUND_S)

    assert "Please also thank the reviewers." in (world.workspace / NOTES_FILE).read_text()
    assert (world.workspace / "out.txt").read_text() == "Please also thank the reviewers.\n"
    assert "Got your message" in watch.texts()
    assert ("write", NOTES_FILE) in [
        (event.name, event.detail) for event in watch.seen(ToolUseEvent)
    ]

    # Between turns a message starts the next turn, which handles it too.
    await watch.session.send("And add a date.")
    await watch.turn_ended(timeout=BOUND_S)
    assert "And add a date." in (world.workspace / NOTES_FILE).read_text()
    await watch.session.close()
    assert (await watch.finished(timeout=BOUND_S)).outcome is Outcome.DONE
    with pytest.raises(Refused):
        await watch.session.send("Too late.")


async def test_a_wait_for_a_message_that_never_comes_goes_on(world: World) -> None:
    watch = await world.launch(ScriptedEngine([WaitForMessage(0.2), Say("Went on.")]))
    await watch.turn_ended(timeout=BOUND_S)
    assert "No message came in 0.2 s" in watch.texts()
    assert "Went on." in watch.texts()
    assert not (world.workspace / NOTES_FILE).exists()
    await watch.session.close()
    assert (await watch.finished(timeout=BOUND_S)).outcome is Outcome.DONE


async def test_close_during_the_script_lets_it_finish(world: World) -> None:
    watch = await world.launch(ScriptedEngine([Sleep(0.3), Write("late.txt", "late\n")]))
    await watch.session.close()
    await watch.turn_ended(timeout=BOUND_S)
    assert (await watch.finished(timeout=BOUND_S)).outcome is Outcome.DONE
    assert (world.workspace / "late.txt").read_text() == "late\n"


# --------------------------------------------------------------------------- tools


async def test_a_command_runs_in_the_workspace_and_its_output_is_said(world: World) -> None:
    engine = ScriptedEngine([Run("echo hello > out.txt && echo mark=$MARK && ls && exit 3")])
    watch = await world.launch(engine, world.task(env={"MARK": "x"}))
    await watch.turn_ended(timeout=BOUND_S)
    assert (world.workspace / "out.txt").read_text() == "hello\n"
    said = watch.texts()
    assert "exited with code 3" in said
    assert "README.md" in said
    assert "mark=x" in said, "the task's environment did not reach the command"
    [shell] = [event for event in watch.seen(ToolUseEvent) if event.name == "shell"]
    assert "echo hello" in shell.detail


async def test_a_write_outside_the_workspace_fails(world: World, tmp_path: Path) -> None:
    watch = await world.launch(ScriptedEngine([Write("../escaped.txt", "x")]))
    finished = await watch.finished(timeout=BOUND_S)
    assert finished.outcome is Outcome.FAILED
    assert "not a file in the workspace" in finished.detail
    assert not (tmp_path / "escaped.txt").exists()


# --------------------------------------------------------------------------- stop and fail


async def test_stop_during_a_command_ends_it(world: World) -> None:
    sleep = odd_sleep(987)
    watch = await world.launch(ScriptedEngine([Say("Working."), Run(sleep)]))
    await watch.next(ToolUseEvent, lambda event: event.name == "shell", timeout=BOUND_S)
    async with asyncio.timeout(BOUND_S):
        while not processes_running(sleep):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(watch.session.stop(), BOUND_S)
    finished = await watch.finished(timeout=BOUND_S)
    assert finished.outcome is Outcome.STOPPED
    assert not processes_running(sleep), "the command outlived the stop"


async def test_stop_during_a_question_ends_the_ask_server(world: World) -> None:
    watch = await world.launch(ScriptedEngine([Ask("Which?", ("a", "b"), "a"), Say("Never.")]))
    await world.question()
    assert ask_servers(), "the ask server is not running"

    await asyncio.wait_for(watch.session.stop(), BOUND_S)
    finished = await watch.finished(timeout=BOUND_S)
    assert finished.outcome is Outcome.STOPPED
    assert "Never." not in watch.texts()
    async with asyncio.timeout(BOUND_S):
        while ask_servers():
            await asyncio.sleep(0.05)


async def test_fail_crashes_the_engine_with_its_message(world: World) -> None:
    engine = ScriptedEngine([Say("About to break."), Fail("out of memory"), Say("Never.")])
    watch = await world.launch(engine)
    finished = await watch.finished(timeout=BOUND_S)
    assert finished.outcome is Outcome.FAILED
    assert finished.detail == "out of memory"
    assert "Never." not in watch.texts()
    assert not watch.seen(TurnEndedEvent)


async def test_a_broken_ask_server_fails_with_its_log(world: World) -> None:
    broken = attrs.evolve(world.task(), ask_command=ask_command(world.folder.path / "missing", 600))
    watch = await world.launch(ScriptedEngine([Ask("Which?", ("a", "b"), "a")]), broken)
    finished = await watch.finished(timeout=BOUND_S)
    assert finished.outcome is Outcome.FAILED
    assert "the ask server failed" in finished.detail
    assert "is not a folder" in finished.detail, finished.detail


# --------------------------------------------------------------------------- where scripts are


async def test_the_script_comes_from_the_tasks_environment(world: World, tmp_path: Path) -> None:
    inline = json.dumps(script_json([Say("From the variable.")]))
    watch = await world.launch(task=world.task(env={SCRIPT_VARIABLE: inline}))
    await watch.turn_ended(timeout=BOUND_S)
    assert watch.texts() == "From the variable."

    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps([{"say": "From a file."}]))
    watch = await world.launch(task=world.task(env={SCRIPT_VARIABLE: str(script_file)}))
    await watch.turn_ended(timeout=BOUND_S)
    assert watch.texts() == "From a file."

    with pytest.raises(BadInput, match="step 1"):
        await ScriptedEngine().launch(world.task(env={SCRIPT_VARIABLE: '[{"dance": 1}]'}))
    with pytest.raises(BadInput, match=str(tmp_path / "nowhere.json")):
        await ScriptedEngine().launch(
            world.task(env={SCRIPT_VARIABLE: str(tmp_path / "nowhere.json")})
        )


def test_scripts_read_back_what_they_write() -> None:
    steps = (
        *default_script(PROMPT),
        Run("make check"),
        WaitForMessage(5),
        Sleep(0.5),
        Fail("boom"),
    )
    assert parse_script(json.loads(json.dumps(script_json(steps)))) == steps
    assert parse_script([{"wait_for_message": 3}, {"sleep": 1}]) == (WaitForMessage(3), Sleep(1))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"say": "x"}, "a list of steps"),
        (["say"], "not an object"),
        ([{"say": "x", "run": "y"}], "exactly one"),
        ([{"write": "a.txt"}], "step 1 (write)"),
        ([{"say": "x"}, {"say": "x", "loud": True}], "step 2 (say) has unknown keys: loud"),
        ([{"sleep": "long"}], "number of seconds"),
        ([{"ask": "Which?", "options": "ab", "recommended": "a"}], "list of strings"),
    ],
)
def test_a_bad_script_is_refused_naming_the_step(data: object, says: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_script(data)
    assert says in str(raised.value)


def test_the_registration_builds_a_scripted_engine() -> None:
    [registration] = shadowclone_engines()
    assert registration.name == "scripted"
    assert isinstance(registration.factory(), ScriptedEngine)


# --------------------------------------------------------------------------- the driver


async def test_supervise_engine_drives_a_scripted_clone_end_to_end(world: World) -> None:
    engine = ScriptedEngine(
        [
            Say("I read the issue."),
            Ask("Which greeting style?", ("formal", "friendly"), "friendly"),
            WaitForMessage(BOUND_S),
            Write("GREETING.md", "A {answer} hello; {message}\n"),
            Say("Done."),
        ]
    )
    session = await engine.launch(world.task())
    progress = ProgressWriter(world.folder, lambda text: text)
    stop = asyncio.Event()

    async def owner() -> None:
        asked = await world.question()
        assert asked.question is not None
        world.deliver(
            InboxLine(id="i1", kind=InboxKind.ANSWER, text="formal", question_id=asked.question.id)
        )
        world.deliver(InboxLine(id="i2", kind=InboxKind.MESSAGE, text="sign it from the team"))

    async with contextlib.aclosing(delivered(world.folder, {InboxKind.MESSAGE}, 0.1)) as messages:
        answering = asyncio.create_task(owner())
        result = await asyncio.wait_for(
            supervise_engine(session, progress, messages, stop, stall_timeout_s=BOUND_S),
            BOUND_S * 2,
        )
        await asyncio.wait_for(answering, BOUND_S)

    assert result.outcome is Outcome.DONE, result.detail
    assert result.last_text == "Done."
    assert (
        world.workspace / "GREETING.md"
    ).read_text() == "A formal hello; sign it from the team\n"
    assert "sign it from the team" in (world.workspace / NOTES_FILE).read_text()
    kinds = {line.kind for line in world.folder.progress()[0]}
    assert {
        ProgressKind.TEXT,
        ProgressKind.TOOL,
        ProgressKind.QUESTION,
        ProgressKind.ANSWER,
        ProgressKind.MESSAGE,
        ProgressKind.USAGE,
    } <= kinds
    [message] = world.lines(ProgressKind.MESSAGE)
    assert message.text == "sign it from the team"
