"""A dev container's lifecycle commands, run by the run program where the specification runs
them: in the workspace, with the repository there, in order (named ones of a key in parallel),
before the engine starts; their output in progress lines; a failure ends the commands after it
and is told to the engine; a stranger's work runs none of them; a stop ends them (the real
Claude Code CLI, the fake model server and GitHub)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psutil
import pytest
from shadowclone import contract
from shadowclone.node.lifecycle import Lifecycle
from shadowclone.node.schemas import ProgressKind, ProgressLine, Step, StopMarker
from shadowclone.plugin.types import Outcome
from shadowclone_testing.clone_world import World, models
from shadowclone_testing.fakes.models import Shell, Text

LIFECYCLE = Lifecycle(
    on_create=("cp deps.lock installed.txt",),
    update_content=("echo updated >> installed.txt",),
    post_create=("test -f installed.txt && echo ready > READY", "echo made; echo said >&2"),
    post_start=("echo started",),
)


def texts(lines: list[ProgressLine]) -> list[str]:
    return [line.text for line in lines]


def test_the_commands_run_in_order_in_the_workspace_before_the_engine(world: World) -> None:
    gh = world.github
    gh.commit("owner/app", "main", {"deps.lock": "left-pad==1.3\n"}, author="owner")
    number = gh.create_issue("owner/app", author="owner", title="Use the dependencies")
    with models(Shell("cat READY installed.txt; echo work > WORK.md"), Text("Done.")) as server:
        code, lines = world.run(world.folder(number, server, lifecycle=LIFECYCLE))
        first = server.model_requests()[0]
        second = server.model_requests()[1]
    said = texts(lines)
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), said
    ran = [text.partition(": $ ")[0] for text in said if ": $ " in text]
    assert ran == [key for key, _ in LIFECYCLE.commands()]
    for output in (
        "postCreateCommand: made",
        "postCreateCommand: said",
        "postStartCommand: started",
    ):
        assert output in said
    last = max(i for i, text in enumerate(said) if text.startswith("postStartCommand: done in"))
    engine_lines = [i for i, line in enumerate(lines) if line.step is Step.ENGINE]
    assert engine_lines and min(engine_lines) > last
    assert all(second.contains(text) for text in ("left-pad==1.3", "updated", "ready"))
    assert not first.contains("dev container")  # nothing to tell: all passed
    workspace = world.tmp / f"run-{number}" / "workspace"
    assert (workspace / "READY").read_text() == "ready\n"
    # What the commands made is the environment's: the work's branch has the engine's only.
    assert "made by the lifecycle commands, in no .gitignore): READY, installed.txt" in " ".join(
        said
    )
    assert "/READY\n" in (workspace / ".git" / "info" / "exclude").read_text()  # the engine's
    branch = "shadowclone/1-use-the-dependencies"
    assert gh.read_file("owner/app", branch, "WORK.md") == "work\n"
    assert gh.read_file("owner/app", branch, "READY") is None
    assert gh.read_file("owner/app", branch, "installed.txt") is None


def test_a_failing_command_ends_the_rest_and_the_engine_is_told(world: World) -> None:
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Work anyway")
    lifecycle = Lifecycle(post_create=("echo broken; exit 3",), post_start=("touch NEVER",))
    with models(Text("Noted.")) as server:
        code, lines = world.run(world.folder(number, server, lifecycle=lifecycle))
        first = server.model_requests()[0]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts(lines)
    [error] = [line for line in lines if line.kind is ProgressKind.ERROR]
    assert error.text.startswith("postCreateCommand exited 3 after ")
    assert error.text.endswith("; 1 command(s) after it not run: the engine starts anyway")
    assert "postCreateCommand: broken" in texts(lines)
    assert not any(text.startswith("postStartCommand") for text in texts(lines))
    assert not (world.tmp / f"run-{number}" / "workspace" / "NEVER").exists()
    assert first.contains("postCreateCommand `echo broken; exit 3` exited 3")


WAIT_FOR = (
    "touch {mine}; for i in $(seq 200); do [ -f {other} ] && exit 0; sleep 0.05; done; exit 7"
)
"""Made its file, then waits up to 10 s for the other's: passes only beside the other."""


def test_named_commands_run_in_parallel_and_one_failing_ends_the_keys_after(
    world: World,
) -> None:
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Parallel setup")
    lifecycle = Lifecycle(
        on_create=(WAIT_FOR.format(mine="A", other="B"), WAIT_FOR.format(mine="B", other="A")),
        post_create=("echo fine", "exit 4"),
        post_start=("touch NEVER",),
        names={"onCreateCommand": ("a", "b"), "postCreateCommand": ("fine", "broken")},
    )
    with models(Text("Noted.")) as server:
        code, lines = world.run(world.folder(number, server, lifecycle=lifecycle))
        first = server.model_requests()[0]
    said = texts(lines)
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), said
    for label in ("onCreateCommand.a", "onCreateCommand.b", "postCreateCommand.fine"):
        assert any(text.startswith(f"{label}: done in ") for text in said), (label, said)
    assert "postCreateCommand.fine: fine" in said
    [error] = [line for line in lines if line.kind is ProgressKind.ERROR]
    assert error.text.startswith("postCreateCommand.broken exited 4 after ")
    assert error.text.endswith("; 1 command(s) after it not run: the engine starts anyway")
    assert not (world.tmp / f"run-{number}" / "workspace" / "NEVER").exists()
    assert first.contains("postCreateCommand.broken `exit 4` exited 4")


def test_a_strangers_pull_request_runs_none_of_them(world: World) -> None:
    gh = world.github
    marker = world.tmp / "ran"
    number = gh.create_pull_request(
        "owner/app",
        author="stranger",
        branch="evil",
        title="Change",
        files={"package.json": "{}"},
        fork=True,
    )
    lifecycle = Lifecycle(on_create=(f"touch {marker}",), post_start=(f"touch {marker}",))
    with models(Text("Looks fine.")) as server:
        code, lines = world.run(world.folder(number, server, lifecycle=lifecycle))
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts(lines)
    assert not marker.exists()
    assert not any(": $ " in text for text in texts(lines))


def test_a_stop_ends_a_running_command_and_what_it_started(world: World) -> None:
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Slow setup")
    lifecycle = Lifecycle(post_create=("sleep 300 & sleep 301",))
    with models(Text("Never asked.")) as server:
        folder = world.folder(number, server, lifecycle=lifecycle)

        def stop_once_it_runs() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                lines, _, _ = folder.progress()
                if any(line.text.startswith("postCreateCommand: $") for line in lines):
                    folder.write_stop(StopMarker())
                    return
                time.sleep(0.1)

        stopper = threading.Thread(target=stop_once_it_runs)
        stopper.start()
        code, lines = world.run(folder)
        stopper.join()
        asked = server.model_requests()
    assert (code, lines[-1].outcome) == (0, Outcome.STOPPED), texts(lines)
    assert asked == []
    sleeping = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] in (["sleep", "300"], ["sleep", "301"])
    ]
    assert sleeping == []


def test_remote_env_reaches_the_commands_and_the_engine_never_over_its_own(world: World) -> None:
    gh = world.github
    number = gh.create_issue("owner/app", author="owner", title="Greet")
    lifecycle = Lifecycle(
        post_create=('echo "cmd=$GREETING home=$HOME"',),
        remote_env={"GREETING": "hi-${containerEnv:MARK_IN_CLONE}", "HOME": "/nowhere"},
    )
    with models(Shell('echo "engine=$GREETING home=$HOME"'), Text("Greeted.")) as server:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MARK_IN_CLONE", "0c7a")
            code, lines = world.run(world.folder(number, server, lifecycle=lifecycle))
        [shell] = [r for r in server.model_requests() if r.contains("engine=")][-1:]
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), texts(lines)
    [said] = [text for text in texts(lines) if text.startswith("postCreateCommand: cmd=")]
    assert said.startswith("postCreateCommand: cmd=hi-0c7a home=") and "/nowhere" not in said
    assert shell.contains("engine=hi-0c7a") and not shell.contains("home=/nowhere")


def prebuilt_files(folder: Path, commands: list[str]) -> None:
    """What run/prebuild.py leaves in a prebuilt image, made by hand: what the commands made
    (a file, a dependency folder, a file in the home) and the info file."""
    (folder / "workspace" / "node_modules" / "left-pad").mkdir(parents=True)
    (folder / "workspace" / "node_modules" / "left-pad" / "index.js").write_text("pad\n")
    (folder / "workspace" / "installed.txt").write_text("from the prebuild\n")
    (folder / "workspace" / "deps.lock").write_text("not the branch's\n")
    (folder / "home" / ".cache" / "tool").mkdir(parents=True)
    (folder / "home" / ".cache" / "tool" / "warm").write_text("warm\n")
    info = {"commit": "c0ffee" * 6 + "abcd", "commands": commands, "made": ["installed.txt"]}
    (folder / contract.PREBUILT_INFO).write_text(json.dumps(info))


@pytest.mark.parametrize("same_commands", [True, False])
def test_a_prebuilt_images_files_stand_in_for_its_commands(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_commands: bool
) -> None:
    """From a prebuilt image made with the same commands, a clone copies in what
    `onCreateCommand` and `updateContentCommand` made (never over its branch's own files) and
    runs only the commands after them; made with other commands, it is not used."""
    gh = world.github
    gh.commit("owner/app", "main", {"deps.lock": "left-pad==1.3\n"}, author="owner")
    number = gh.create_issue("owner/app", author="owner", title="Use the prebuild")
    prebuilt = tmp_path / "prebuilt"
    commands = [line for _, line in LIFECYCLE.prebuilt()]
    prebuilt_files(prebuilt, commands if same_commands else ["make other"])
    monkeypatch.setenv(contract.PREBUILT_VARIABLE, str(prebuilt))
    probe = (
        "cat installed.txt deps.lock node_modules/left-pad/index.js READY $HOME/.cache/tool/warm"
    )
    with models(Shell(probe), Text("Done.")) as server:
        code, lines = world.run(world.folder(number, server, lifecycle=LIFECYCLE))
        second = server.model_requests()[1]
    said = texts(lines)
    assert (code, lines[-1].outcome) == (0, Outcome.DONE), said
    ran = [text.partition(": $ ")[0] for text in said if ": $ " in text]
    assert second.contains("left-pad==1.3") and not second.contains("not the branch's")
    if not same_commands:
        assert ran == [key for key, _ in LIFECYCLE.commands()]
        assert not any("prebuilt image" in text for text in said), said
        return
    assert ran == ["postCreateCommand", "postCreateCommand", "postStartCommand"], said
    assert not [line for line in lines if line.kind is ProgressKind.ERROR], said
    note = "onCreateCommand and updateContentCommand: ran once for the default branch at c0ffee"
    assert any(text.startswith(note) for text in said), said
    for text in ("from the prebuild", "pad", "ready", "warm"):
        assert second.contains(text), text
    branch = "shadowclone/1-use-the-prebuild"
    assert gh.read_file("owner/app", branch, "installed.txt") is None
    assert gh.read_file("owner/app", branch, "node_modules/left-pad/index.js") is None
