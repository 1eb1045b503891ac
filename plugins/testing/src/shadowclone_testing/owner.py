"""The owner of a whole clone: the CLI, a real `shadowclone serve`, the fake GitHub."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from shadowclone.config import Paths, set_value
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import Record, State

from shadowclone_testing.fakes.github import FakeGitHub
from shadowclone_testing.harness import CliResult, set_up
from shadowclone_testing.scripted import Step, script_json
from shadowclone_testing.serving import ServeProcess

Cli = Callable[..., CliResult]
WAIT_S = 180.0
"""Bound on a whole clone's wait for a state."""
SECRET = "sk-ant-api03-planted0123456789abcdefghijklmnop"
"""The model key in the owner's secrets file: it must never leave the clone."""


@attrs.define
class Owner:
    home: Paths
    cli: Cli
    github: FakeGitHub
    token: str
    serve: ServeProcess | None = None

    def serving(self, script: list[Step] | None = None, **extra: str) -> None:
        env = {"SHADOWCLONE_SCRIPT": json.dumps(script_json(script))} if script else {}
        self.serve = ServeProcess.start(self.home, "--stop-grace", "20", env={**env, **extra})
        self.serve.wait_serving()

    def start(self, target: str) -> str:
        result = self.cli("start", target, "--json")
        assert result.code == 0, result.err
        clone_id: str = json.loads(result.out)["id"]
        return clone_id

    def record(self, clone_id: str) -> Record | None:
        return RunFolder(self.home.clones_dir / clone_id).record()

    def wait(self, clone_id: str, *states: State) -> Record:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            record = self.record(clone_id)
            if record is not None and record.state in states:
                return record
            time.sleep(0.2)
        output = self.serve.output[-3000:] if self.serve else ""
        pytest.fail(f"clone {clone_id} never reached {states}: {self.record(clone_id)}\n{output}")


@contextlib.contextmanager
def an_owner(home: Paths, cli: Cli, root: Path) -> Iterator[Owner]:
    """The owner of you/app on a fake GitHub under `root` (a stranger may read it), set up in
    `home` with a GitHub token and a planted model key in its secrets file."""
    with FakeGitHub(root / "github") as github:
        token = github.add_user("you", name="You", email="you@example.com")
        github.add_user("stranger")
        github.create_repo("you/app", files={"README.md": "# app\n"})
        github.grant("you/app", "stranger", "read")
        set_value(home, "github.url", f'"{github.url}"')
        set_value(home, "github.api_url", f'"{github.api_url}"')
        descriptor = os.open(home.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f'github_token = "{token}"\nanthropic_api_key = "{SECRET}"\n')
        set_up(home, "you/app")
        person = Owner(home, cli, github, token)
        try:
            yield person
        finally:
            if person.serve is not None:
                person.serve.end()
