"""The commands on clones: start, list, get, send, answer, stop."""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC
from typing import TYPE_CHECKING

import click

from shadowclone.cli.app import (
    App,
    ago,
    describe,
    emit_json,
    format_progress,
    json_option,
    pass_app,
)
from shadowclone.cli.params import ENGINE, complete_clone_id
from shadowclone.errors import ShadowcloneError

if TYPE_CHECKING:
    from shadowclone.node.repocaches import RepoCache
    from shadowclone.node.retention import Removed
    from shadowclone.node.schemas import ProgressLine

LIST_COLUMNS = (
    ("ID", 18),
    ("STATE", 9),
    ("TARGET", 24),
    ("ENGINE", 8),
    ("REQUESTED", 9),
    ("COST", 8),
)
"""`list`'s columns and their widths (a wider target pushes its row on); the last column, the
pull request or the open question, takes what it needs: a link is never cut."""


def list_row(cells: tuple[str, ...]) -> str:
    """One row: the fixed columns padded, then the last cell whole."""
    *fixed, last = cells
    padded = "  ".join(
        cell.ljust(width) for cell, (_, width) in zip(fixed, LIST_COLUMNS, strict=True)
    )
    return f"{padded}  {last}".rstrip()


def finite(_context: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    """click's ranges let nan through (it compares false both ways)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a number, got {value}")
    return value


@click.command()
@click.argument("target")
@click.option(
    "--engine", type=ENGINE, help="An installed engine: claude, codex... (default: the config's)."
)
@click.option(
    "-m", "--message", "instructions", default="", help="Extra instructions for the clone."
)
@click.option(
    "--allow-secrets",
    is_flag=True,
    help="Let this clone push what looks like a secret (otherwise it stops the push).",
)
@click.option(
    "--max-minutes",
    type=click.FloatRange(min=0, min_open=True, max=10**6),
    callback=finite,
    help="Pause and ask after this many minutes of work (default: [limits] clone_minutes).",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    help="Pause and ask after this many turns (default: [limits] clone_turns).",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True, max=10**6),
    callback=finite,
    metavar="USD",
    help="Pause and ask at this cost in dollars (default: [limits] clone_cost_usd).",
)
@json_option
@pass_app
def start(
    app: App,
    target: str,
    engine: str | None,
    instructions: str,
    allow_secrets: bool,
    max_minutes: float | None,
    max_turns: int | None,
    max_cost: float | None,
    as_json: bool,
) -> None:
    """Queue a clone on TARGET: owner/repo#N, or an issue or pull request URL.

    \b
    Examples:
      shadowclone start you/app#12
      shadowclone start https://github.com/you/app/pull/7 --engine codex
      shadowclone start you/app#12 -m "add a test for the empty case"
      shadowclone start you/app#12 --max-minutes 30 --max-cost 2
    """
    from shadowclone.node.schemas import Caps

    view = app.node().start(
        target,
        engine=engine,
        instructions=instructions,
        allow_secrets=allow_secrets,
        caps=Caps(minutes=max_minutes, turns=max_turns, cost_usd=max_cost),
    )
    if as_json:
        emit_json(view)
        return
    app.out.print(f"queued {view.id} on {view.target.key} with {view.engine}")
    if view.waiting_for:
        app.out.print(f"waiting for {view.waiting_for}")
    app.out.print(f"follow it: shadowclone get {view.id} --follow")


_CONTROL_TO_SPACE = {code: " " for code in (*range(0x20), 0x7F)}


def tsv_cell(text: str) -> str:
    """A whole value on one row: tabs, newlines and other control characters become spaces."""
    return text.translate(_CONTROL_TO_SPACE)


@click.command(name="list")
@click.option("--all", "include_all", is_flag=True, help="Every clone, not only recent ones.")
@click.option("--limit", default=30, show_default=True, help="How many recent clones to show.")
@json_option
@pass_app
def list_(app: App, include_all: bool, limit: int, as_json: bool) -> None:
    """List active clones and the most recent others.

    To a terminal, a table; to a pipe or a file, one clone per line with its whole values
    separated by tabs and no header: id, state, target, engine, requested (ISO 8601, UTC), the
    pull request or the open question, and the cost so far in dollars (empty if not reported).

    \b
    Examples:
      shadowclone list --all
      shadowclone list | cut -f1,6
      shadowclone list --json | jq -r '.[] | select(.state == "waiting") | .id'
    """
    from shadowclone.node.local import CloneView
    from shadowclone.node.schemas import CONVERTER

    table = sys.stdout.isatty()
    # Streamed, a row at a time: `--all` over a hundred thousand clones holds one of them
    # (written through stdout's own buffer: a flush a row would be a write a row to a pipe).
    write = sys.stdout.write
    shown = 0
    for item in app.reading_node().views(include_all=include_all, limit=limit):
        if not isinstance(item, CloneView):
            click.echo(f"warning: {item}", err=True)
            continue
        extra = item.pr_url or (f"? {item.question.text}" if item.question else "")
        if as_json:
            data = json.dumps(CONVERTER.unstructure(item), ensure_ascii=False, default=str)
            write(("[\n" if not shown else ",\n") + data)
        elif not table:
            requested = item.requested_at.astimezone(UTC).isoformat(timespec="seconds")
            cost = f"{item.usage.cost_usd:.4f}" if item.usage.cost_usd is not None else ""
            row = (item.id, item.state, item.target.key, item.engine, requested, extra, cost)
            write("\t".join(tsv_cell(str(cell)) for cell in row) + "\n")
        else:
            if not shown:
                write(list_row((*(name for name, _ in LIST_COLUMNS), "PR / QUESTION")) + "\n")
            state = f"{item.state}" + ("*" if item.stop_requested and item.state.active else "")
            cost = f"${item.usage.cost_usd:.2f}" if item.usage.cost_usd is not None else "-"
            cells = (
                item.id,
                state,
                item.target.key,
                item.engine,
                ago(item.requested_at),
                cost,
                extra,
            )
            write(list_row(cells) + "\n")
        shown += 1
    if as_json:
        write("\n]\n" if shown else "[]\n")
    elif not shown and table:
        write("no clones yet; start one with: shadowclone start owner/repo#N\n")
    sys.stdout.flush()


@click.command()
@click.argument("clone_id", metavar="ID", shell_complete=complete_clone_id)
@click.option("-f", "--follow", is_flag=True, help="Stream new progress lines until it ends.")
@click.option("-n", "--lines", default=20, show_default=True, help="Progress lines to show.")
@click.option(
    "--exit-status",
    is_flag=True,
    help="With --follow: exit 1 when the clone ends failed or stopped.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON for scripts; with --follow, one progress line per line (JSON Lines).",
)
@pass_app
def get(app: App, clone_id: str, follow: bool, lines: int, exit_status: bool, as_json: bool) -> int:
    """Show one clone: state, target, question, pull request, last progress lines.

    With --follow, stream its progress until it ends; while it is queued, say on stderr what it
    waits for.

    \b
    Examples:
      shadowclone get 261202-120301-k3fa
      shadowclone get 261202-120301-k3fa --follow --exit-status
      shadowclone get 261202-120301-k3fa --follow --json | jq -r .text
    """
    from shadowclone.node.schemas import CONVERTER, State
    from shadowclone.plugin.types import Outcome

    node = app.reading_node()
    if exit_status and not follow:
        raise click.UsageError("--exit-status: only with --follow", ctx=click.get_current_context())
    if not follow:
        view = node.get(clone_id, lines=lines)
        if as_json:
            emit_json(view)
        else:
            app.out.print(describe(view))
        return 0

    def waiting(reason: str) -> None:
        click.echo(f"waiting for {reason}", err=True)

    final: ProgressLine | None = None
    for line in node.follow(clone_id, lines=lines, on_wait=waiting):
        final = line if line.final else final
        if as_json:
            data = CONVERTER.unstructure(line)
            click.echo(json.dumps(data, ensure_ascii=False, default=str))
        else:
            app.out.print(format_progress(line))
    view = node.get(clone_id, lines=1)
    state = view.state
    if final is not None and state.active:
        # Serve records the end a moment after the final line: the line says how it ended.
        from shadowclone.serve.records import ENDED_BY

        state = ENDED_BY[final.outcome or Outcome.FAILED]
    if not as_json:
        app.out.print(f"clone {view.id} is {state}" + (f": {view.pr_url}" if view.pr_url else ""))
    if exit_status and state in (State.FAILED, State.STOPPED):
        return 1
    return 0


@click.command()
@click.argument("clone_id", metavar="ID", shell_complete=complete_clone_id)
@click.argument("text")
@json_option
@pass_app
def send(app: App, clone_id: str, text: str, as_json: bool) -> None:
    """Send a message to a running or queued clone.

    \b
    Example:
      shadowclone send 261202-120301-k3fa "please also update the changelog"
    """
    line = app.node().send(clone_id, text)
    if as_json:
        emit_json(line)
    else:
        app.out.print(f"sent to {clone_id}: {line.id}")


@click.command()
@click.argument("clone_id", metavar="ID", shell_complete=complete_clone_id)
@click.argument("question_id", metavar="QUESTION")
@click.argument("choice")
@json_option
@pass_app
def answer(app: App, clone_id: str, question_id: str, choice: str, as_json: bool) -> None:
    """Answer a clone's open question with one of its options (or its number).

    \b
    Examples:
      shadowclone answer 261202-120301-k3fa q1 postgres
      shadowclone answer 261202-120301-k3fa q1 2
    """
    line = app.node().answer(clone_id, question_id, choice)
    if as_json:
        emit_json(line)
    else:
        app.out.print(f"answered {question_id}: {line.text}")


@click.command()
@click.argument("clone_id", metavar="ID", shell_complete=complete_clone_id)
@json_option
@pass_app
def stop(app: App, clone_id: str, as_json: bool) -> None:
    """Stop a clone: a queued one never starts, a running one is stopped and its work saved."""
    from shadowclone.node.schemas import State

    view = app.node().stop(clone_id)
    if as_json:
        emit_json(view)
    elif view.state is State.STOPPED:
        app.out.print(f"stopped {view.id} in the queue: it never starts")
    elif view.state is State.QUEUED:
        app.out.print(f"stopping {view.id}: serve is launching it; it stops as soon as it runs")
    else:
        app.out.print(f"stopping {view.id} ({view.state})")


@click.command()
@click.argument("clone_id", metavar="ID", shell_complete=complete_clone_id)
@json_option
@pass_app
def resume(app: App, clone_id: str, as_json: bool) -> None:
    """Resume a clone scheduled for its login's usage limit now, not at the reset.

    Should the provider still refuse, the clone is scheduled again."""
    view = app.node().resume(clone_id)
    if as_json:
        emit_json(view)
    else:
        app.out.print(f"resuming {view.id}")


def size(count: int) -> str:
    """Bytes as an owner reads them: 512 B, 3.4 MB, 1.2 GB."""
    amount = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


@click.command()
@click.argument(
    "clone_ids", metavar="ID...", nargs=-1, required=True, shell_complete=complete_clone_id
)
@json_option
@pass_app
def rm(app: App, clone_ids: tuple[str, ...], as_json: bool) -> int:
    """Remove ended clones: their run folders and workspaces; a running clone is refused.

    \b
    Examples:
      shadowclone rm 261202-120301-k3fa
      shadowclone prune --older-than 30d    # every clone that ended 30 days ago or more
    """
    node = app.node()
    removed: list[Removed] = []
    refused = 0
    for clone_id in clone_ids:
        try:
            gone = node.remove(clone_id)
        except ShadowcloneError as error:
            click.echo(f"shadowclone: {error}", err=True)
            refused = max(refused, error.exit_code)
            continue
        removed.append(gone)
        if not as_json:
            app.out.print(f"removed {gone.id} ({gone.state}, {size(gone.bytes)})")
        if gone.left:
            click.echo(f"warning: {gone.id}: {gone.left}", err=True)
    if as_json:
        emit_json(removed)
    return refused


@click.command()
@click.option(
    "--older-than",
    "older_than",
    metavar="DURATION",
    help="Remove clones that ended at least this long ago: 30d, 12h, 1w2d (s, m, h, d, w).",
)
@click.option(
    "--caches",
    is_flag=True,
    help="Remove the repositories' caches too, but those of repositories with an active clone.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@json_option
@pass_app
def prune(app: App, older_than: str | None, caches: bool, dry_run: bool, as_json: bool) -> None:
    """Remove every clone that ended more than --older-than ago (active clones stay), and with
    --caches the repositories' caches, which the next clone of each makes again.

    \b
    Examples:
      shadowclone prune --older-than 30d --dry-run
      shadowclone prune --older-than 2w
      shadowclone prune --caches
    """
    from shadowclone.config.durations import parse_duration

    if older_than is None and not caches:
        raise click.UsageError("say what to remove: --older-than DURATION, --caches, or both")
    gone = app.node().prune(parse_duration(older_than), dry_run=dry_run) if older_than else []
    dropped = _prune_caches(app, dry_run) if caches else []
    if as_json:
        emit_json({"clones": gone, "caches": dropped} if caches else gone)
        return
    verb = "would remove" if dry_run else "removed"
    for item in gone:
        app.out.print(f"{verb} {item.id} ({item.state}, {size(item.bytes)})")
        if item.left:
            click.echo(f"warning: {item.id}: {item.left}", err=True)
    if older_than:
        total = size(sum(item.bytes for item in gone))
        app.out.print(f"{verb} {len(gone)} clone{'' if len(gone) == 1 else 's'}, {total}")
    for cache in dropped:
        app.out.print(f"{verb} the cache of {cache.repo} ({size(cache.bytes)})")


def _prune_caches(app: App, dry_run: bool) -> list[RepoCache]:
    from shadowclone.node.repocaches import drop_repo_caches, repo_caches

    node = app.node()
    active = {view.target.repo_full_name.lower() for view in node.active()}
    if dry_run:
        return [cache for cache in repo_caches(node.paths) if cache.repo not in active]
    dropped, problems = drop_repo_caches(node.paths, active)
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    return dropped


COMMANDS = (start, list_, get, send, answer, stop, rm, prune)
