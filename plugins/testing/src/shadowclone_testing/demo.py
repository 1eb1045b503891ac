"""`shadowclone demo`: one whole clone on this machine, with no account and no Docker.

The testing kit adds it to the `shadowclone` command (entry-point group
`shadowclone.commands`): it runs on the kit's fakes, which the core never imports.

A fake GitHub on loopback holds a sample repository and issue; `serve` runs with the fake
launcher and the scripted engine; the demo starts a clone on the issue, follows it live,
answers its question as the owner would, and prints the pull request and the final report.
It exits 0 only if all of that really happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from rich.text import Text
from shadowclone.cli.app import App, format_progress
from shadowclone.config import Paths, default_paths, init_config, load_config, set_value
from shadowclone.config.schema import DEMO_IMAGE
from shadowclone.errors import PluginUnavailable, ShadowcloneError
from shadowclone.node.schemas import ProgressKind, SetupRecord, State
from shadowclone.node.setups import write_setup
from shadowclone.plugin.node import LocalNode
from shadowclone.plugin.types import Outcome

from shadowclone_testing.fakes.github import FakeGitHub

REPO = "you/hello"
ISSUE_TITLE = "Add a greeting for new contributors"
ISSUE_BODY = "New contributors should be greeted. Add a GREETING.md with a short greeting."
ANSWER = "friendly"
DEMO_TIMEOUT_S = 300.0


class DemoFailed(ShadowcloneError):
    """Something the demo promises did not happen."""


@contextlib.contextmanager
def _serving(paths: Paths) -> Iterator[threading.Thread]:
    from shadowclone.serve.loop import serve_clones

    config, resolved = load_config(paths)
    stop, ready = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            serve_clones(config, resolved, stop_event=stop, ready=ready)
        except BaseException as error:  # noqa: BLE001 - reported by the demo below
            errors.append(error)
            ready.set()

    thread = threading.Thread(target=run, name="serve", daemon=True)
    thread.start()
    ready.wait(60)
    if errors:
        raise DemoFailed(f"serve did not start: {errors[0]}")
    try:
        yield thread
    finally:
        stop.set()
        thread.join(30)


def _prepare(root: Path, github: FakeGitHub, launcher: str, image: str | None) -> tuple[Paths, int]:
    paths = default_paths({"SHADOWCLONE_HOME": str(root)})
    init_config(paths)
    if image:
        set_value(paths, "image", json.dumps(image))
    for key, value in (
        ("providers.scripted.login", '"no-login"'),
        ("engine", '"scripted"'),
        ("launcher", json.dumps(launcher)),
        ("github.url", f'"{github.url}"'),
        ("github.api_url", f'"{github.api_url}"'),
    ):
        set_value(paths, key, value)
    token = github.add_user("you", name="You", email="you@example.com")
    github.create_repo(
        REPO,
        files={"README.md": "# hello\n\nA sample repository for the shadowclone demo.\n"},
    )
    number = github.create_issue(REPO, author="you", title=ISSUE_TITLE, body=ISSUE_BODY)
    # The demo makes its own secrets file: it writes it, and only the clone reads it.
    descriptor = os.open(paths.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(f'github_token = "{token}"\n')
    write_setup(
        paths,
        SetupRecord(repo=REPO, config_version=1, engine="scripted", login="no-login"),
    )
    return paths, number


def _host_address(launcher: str, image: str | None) -> str:
    """Where the launcher's clones reach this machine: the fake GitHub listens there only."""
    from shadowclone.plugin import LauncherSettings, load_registry

    settings = LauncherSettings(default_paths().clones_dir, image)
    try:
        return load_registry().launcher(launcher).factory(settings).host_address()
    except PluginUnavailable as error:
        raise DemoFailed(str(error)) from None


def run_demo(app: App, keep: bool, launcher: str, image: str | None) -> None:
    """The demo `shadowclone demo` runs (see demo_command.py for its options)."""
    out = app.out
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="shadowclone-demo-"))
    # Run as root, the fake launcher runs the engine as a user of its own, who must be able to
    # reach the clone's folders (searchable, not listable).
    root.chmod(0o711)
    previous_home = os.environ.get("SHADOWCLONE_HOME")
    os.environ["SHADOWCLONE_HOME"] = str(root)
    try:
        if launcher == "docker":
            image = image or DEMO_IMAGE
        host = _host_address(launcher, image)
        with FakeGitHub(root / "github", host=host) as github:
            paths, number = _prepare(root, github, launcher, image)
            out.print(Text.assemble(("shadowclone demo", "bold"), f"  home {root}"))
            out.print(f"fake GitHub at {github.url}: {REPO} with issue #{number} {ISSUE_TITLE!r}")
            with _serving(paths):
                out.print(f"serve is running ({launcher} launcher, scripted engine)")
                config, resolved = load_config(paths)
                node = LocalNode(config, resolved)
                view = node.start(f"{REPO}#{number}")
                out.print(f"$ shadowclone start {REPO}#{number}\nqueued {view.id}")
                out.print(f"$ shadowclone get {view.id} --follow")
                answered = _follow(app, node, view.id)
                final = node.get(view.id, lines=1)
            _check(github, final.state, final.outcome, final.pr_url, answered)
            out.print(Text.assemble("\n", ("pull request", "bold"), f" {final.pr_url}"))
            branch_file = _greeting(github)
            out.print(f"GREETING.md on the clone's branch:\n{branch_file}")
            out.print("final report", style="bold")
            out.print(final.report or "")
            out.print(f"\ndemo done in {time.monotonic() - began:.1f} s")
    finally:
        if previous_home is None:
            os.environ.pop("SHADOWCLONE_HOME", None)
        else:
            os.environ["SHADOWCLONE_HOME"] = previous_home
        if keep:
            out.print(f"kept: SHADOWCLONE_HOME={root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _follow(app: App, node: LocalNode, clone_id: str) -> bool:
    """Print each progress line as it comes; answer the clone's question as the owner."""
    answered = False
    deadline = time.monotonic() + DEMO_TIMEOUT_S
    for line in node.follow(clone_id, lines=0, poll_s=0.5):
        app.out.print(format_progress(line))
        if line.kind is ProgressKind.QUESTION and line.question is not None:
            app.out.print(f"$ shadowclone answer {clone_id} {line.question.id} {ANSWER}")
            node.answer(clone_id, line.question.id, ANSWER)
            answered = True
        if time.monotonic() > deadline:
            raise DemoFailed(f"the clone did not finish within {DEMO_TIMEOUT_S:.0f} s")
    # The final line is written: serve records the end as the clone's process exits.
    while node.get(clone_id, lines=1).state.active and time.monotonic() < deadline:
        time.sleep(0.02)
    return answered


def _greeting(github: FakeGitHub) -> str:
    pulls = github.pull_requests(REPO)
    if not pulls or pulls[-1].pull is None:
        raise DemoFailed("no pull request was opened")
    text = github.read_file(REPO, pulls[-1].pull.head_ref, "GREETING.md")
    if text is None:
        raise DemoFailed("the pull request's branch has no GREETING.md")
    return text


def _check(
    github: FakeGitHub,
    state: State,
    outcome: Outcome | None,
    pr_url: str | None,
    answered: bool,
) -> None:
    if state is not State.DONE or outcome is not Outcome.DONE:
        raise DemoFailed(f"the clone ended {state} ({outcome}), not done")
    if not answered:
        raise DemoFailed("the clone asked no question")
    if not pr_url:
        raise DemoFailed("the clone reported no pull request")
    if ANSWER not in _greeting(github):
        raise DemoFailed("the answer did not reach the clone's work")
