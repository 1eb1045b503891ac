"""`shadowclone demo`: the node at work on a temporary home, with no account and no Docker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from shadowclone.cli.app import App, describe, pass_app
from shadowclone.config import default_paths, init_config, set_value
from shadowclone.node.local import local_node
from shadowclone.node.schemas import SetupRecord
from shadowclone.node.setups import write_setup


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print where it is.")
@pass_app
def demo(app: App, keep: bool) -> None:
    """Queue clones, list them, send a message and stop one, on a temporary home."""
    root = Path(tempfile.mkdtemp(prefix="shadowclone-demo-"))
    paths = default_paths({"SHADOWCLONE_HOME": str(root)})
    os.environ["SHADOWCLONE_HOME"] = str(root)
    out = app.out
    out.print(f"[bold]shadowclone demo[/] in a temporary home: {root}")
    init_config(paths)
    for key, value in (
        ("providers.scripted.login", '"no-login"'),
        ("engine", '"scripted"'),
        ("launcher", '"fake"'),
    ):
        set_value(paths, key, value)
    write_setup(
        paths, SetupRecord(repo="demo/hello", config_version=1, engine="scripted", login="no-login")
    )
    out.print("set up demo/hello (config version 1)")
    node = local_node(paths)
    first = node.start("demo/hello#1", instructions="add a greeting")
    second = node.start("https://github.com/demo/hello/issues/2")
    out.print(f"$ shadowclone start demo/hello#1      -> queued {first.id}")
    out.print(f"$ shadowclone start .../issues/2      -> queued {second.id}")
    try:
        node.start("demo/hello#1")
    except Exception as refused:  # noqa: BLE001 - shown to the owner, as the CLI would
        out.print(f"$ shadowclone start demo/hello#1      -> refused: {refused}")
    line = node.send(first.id, "please keep the greeting short")
    out.print(f"$ shadowclone send {first.id} ...  -> inbox line {line.id}")
    stopped = node.stop(second.id)
    out.print(f"$ shadowclone stop {second.id}       -> {stopped.state}")
    out.print("$ shadowclone list")
    for view in node.list().clones:
        out.print(f"  {view.id}  {view.state:<8} {view.target.key}")
    out.print(f"$ shadowclone get {first.id}")
    out.print(describe(node.get(first.id)))
    if not keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    else:
        out.print(f"kept: SHADOWCLONE_HOME={root}")
