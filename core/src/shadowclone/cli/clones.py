"""The commands on clones: start, list, get, send, answer, stop."""

from __future__ import annotations

import click
from rich.table import Table

from shadowclone.cli.app import (
    App,
    ago,
    describe,
    emit_json,
    format_progress,
    json_option,
    pass_app,
)


@click.command()
@click.argument("target")
@click.option("--engine", help="claude or codex (default: the config's engine).")
@click.option(
    "-m", "--message", "instructions", default="", help="Extra instructions for the clone."
)
@json_option
@pass_app
def start(app: App, target: str, engine: str | None, instructions: str, as_json: bool) -> None:
    """Queue a clone on TARGET: owner/repo#N, or an issue or pull request URL."""
    view = app.node().start(target, engine=engine, instructions=instructions)
    if as_json:
        emit_json(view)
        return
    app.out.print(f"queued {view.id} on {view.target.key} with {view.engine}")
    app.out.print(f"follow it: shadowclone get {view.id} --follow")


@click.command(name="list")
@click.option("--all", "include_all", is_flag=True, help="Every clone, not only recent ones.")
@click.option("--limit", default=30, show_default=True, help="How many recent clones to show.")
@json_option
@pass_app
def list_(app: App, include_all: bool, limit: int, as_json: bool) -> None:
    """List active clones and the most recent others."""
    listing = app.node().list(include_all=include_all, limit=limit)
    for problem in listing.problems:
        click.echo(f"warning: {problem}", err=True)
    if as_json:
        emit_json(listing.clones)
        return
    if not listing.clones:
        app.out.print("no clones yet; start one with: shadowclone start owner/repo#N")
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("ID", "STATE", "TARGET", "ENGINE", "REQUESTED", "PR / QUESTION"):
        table.add_column(column, no_wrap=column != "PR / QUESTION")
    for view in listing.clones:
        extra = view.pr_url or (f"? {view.question.text}" if view.question else "")
        state = f"{view.state}" + ("*" if view.stop_requested and view.state.active else "")
        table.add_row(view.id, state, view.target.key, view.engine, ago(view.requested_at), extra)
    app.out.print(table)


@click.command()
@click.argument("clone_id", metavar="ID")
@click.option("-f", "--follow", is_flag=True, help="Stream new progress lines until it ends.")
@click.option("-n", "--lines", default=20, show_default=True, help="Progress lines to show.")
@json_option
@pass_app
def get(app: App, clone_id: str, follow: bool, lines: int, as_json: bool) -> None:
    """Show one clone: state, target, question, pull request, last progress lines."""
    node = app.node()
    if follow:
        for line in node.follow(clone_id, lines=lines):
            if as_json:
                emit_json(line)
            else:
                app.out.print(format_progress(line))
        view = node.get(clone_id, lines=1)
        if not as_json:
            app.out.print(
                f"clone {view.id} is {view.state}" + (f": {view.pr_url}" if view.pr_url else "")
            )
        return
    view = node.get(clone_id, lines=lines)
    if as_json:
        emit_json(view)
    else:
        app.out.print(describe(view))


@click.command()
@click.argument("clone_id", metavar="ID")
@click.argument("text")
@json_option
@pass_app
def send(app: App, clone_id: str, text: str, as_json: bool) -> None:
    """Send a message to a running or queued clone."""
    line = app.node().send(clone_id, text)
    if as_json:
        emit_json(line)
    else:
        app.out.print(f"sent to {clone_id}: {line.id}")


@click.command()
@click.argument("clone_id", metavar="ID")
@click.argument("question_id", metavar="QUESTION")
@click.argument("choice")
@json_option
@pass_app
def answer(app: App, clone_id: str, question_id: str, choice: str, as_json: bool) -> None:
    """Answer a clone's open question with one of its options (or its number)."""
    line = app.node().answer(clone_id, question_id, choice)
    if as_json:
        emit_json(line)
    else:
        app.out.print(f"answered {question_id}: {line.text}")


@click.command()
@click.argument("clone_id", metavar="ID")
@json_option
@pass_app
def stop(app: App, clone_id: str, as_json: bool) -> None:
    """Stop a clone: a queued one never starts, a running one is stopped and its work saved."""
    view = app.node().stop(clone_id)
    if as_json:
        emit_json(view)
    else:
        app.out.print(f"stopping {view.id} ({view.state})")


COMMANDS = (start, list_, get, send, answer, stop)
