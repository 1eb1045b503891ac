"""Host code never opens the secrets file for reading. An audit hook watches every `open`
in a process that runs setup, start and serve through a whole clone (the clone itself, a
separate process standing in for the container, is the one that reads it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from shadowclone_testing.fakes.github import FakeGitHub

AUDITED = textwrap.dedent(
    """
    import json, os, sys, threading, time

    secrets = os.path.realpath(sys.argv[1])
    reads = []

    def audit(event, args):
        if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        if os.path.realpath(os.fsdecode(args[0])) != secrets:
            return
        mode, flags = args[1], args[2]
        writing_only = (
            ("w" in mode or "a" in mode or "x" in mode) and "+" not in mode
            if isinstance(mode, str)
            else (flags & os.O_ACCMODE) == os.O_WRONLY
        )
        if not writing_only:
            reads.append(f"{event} {args!r}")

    sys.addaudithook(audit)

    from shadowclone.cli import main
    from shadowclone.config import load_config
    from shadowclone.plugin.node import local_node
    from shadowclone.serve.loop import serve_clones

    codes = {"setup-template": main(["setup", "you/app"])}
    with open(secrets, "w") as handle:  # the owner pastes the token (a write, not a read)
        handle.write(f'github_token = "{os.environ["TEST_TOKEN"]}"\\n')
    codes["setup"] = main(["setup", "you/app"])
    codes["start"] = main(["start", "you/app#1"])
    config, paths = load_config()
    stop = threading.Event()
    serving = threading.Thread(
        target=serve_clones, args=(config, paths), kwargs={"stop_event": stop}
    )
    serving.start()
    node = local_node()
    clone_id = node.list().clones[0].id
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        view = node.get(clone_id, lines=50)
        if view.question is not None:
            main(["answer", clone_id, view.question.id, "formal"])
        if not view.state.active:
            break
        time.sleep(0.3)
    codes["list"] = main(["list"])
    codes["get"] = main(["get", clone_id])
    stop.set()
    serving.join(30)
    print(json.dumps({"codes": codes, "state": str(node.get(clone_id).state), "reads": reads}))
    """
)


def test_no_host_command_opens_the_secrets_file_for_reading(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "SHADOWCLONE_HOME": str(home)}
    with FakeGitHub(tmp_path / "github") as github:
        token = github.add_user("you", name="You")
        github.create_repo("you/app", files={"README.md": "x"})
        github.create_issue("you/app", author="you", title="Add a greeting")
        shadowclone = [sys.executable, "-c", "from shadowclone.cli import entry; entry()"]
        for args in (
            ["config", "init"],
            ["config", "set", "providers.scripted.login", '"no-login"'],
            ["config", "set", "engine", '"scripted"'],
            ["config", "set", "launcher", '"fake"'],
            ["config", "set", "github.url", f'"{github.url}"'],
            ["config", "set", "github.api_url", f'"{github.api_url}"'],
        ):
            subprocess.run([*shadowclone, *args], env=env, check=True, capture_output=True)
        done = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", AUDITED, str(home / "secrets.toml")],
            env={**env, "TEST_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["codes"] == {"setup-template": 1, "setup": 0, "start": 0, "list": 0, "get": 0}
    assert result["state"] == "done"
    assert result["reads"] == []
