"""The application object every command gets through `ctx.obj`, and output helpers.

Imported by every command's module, so kept light: the node, the config and rich are loaded
when a command runs, not when the shell completes one (a TAB answers in a tenth of a second)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import click

from shadowclone.config import default_paths
from shadowclone.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from shadowclone.config import Paths
    from shadowclone.node.local import CloneView
    from shadowclone.node.schemas import ProgressLine
    from shadowclone.plugin.node import LocalNode

F = TypeVar("F", bound=Callable[..., Any])


@attrs.define
class App:
    paths: Paths = attrs.field(factory=default_paths)
    _node: LocalNode | None = None
    _out: Console | None = None

    @property
    def out(self) -> Console:
        """A clone's text is data, never markup: `[/x]` or `[redacted]` is printed as written."""
        if self._out is None:
            from rich.console import Console

            self._out = Console(highlight=False, soft_wrap=True, emoji=False, markup=False)
        return self._out

    def node(self) -> LocalNode:
        from shadowclone.config.load import NoConfigFile
        from shadowclone.plugin.node import local_node

        if self._node is None:
            try:
                self._node = local_node(self.paths)
            except NoConfigFile:
                raise  # (serve, which runs only with a config, holds none to say)
            except ConfigError as error:
                raise ConfigError(config_error_line(self.paths, error)) from None
        return self._node

    def reading_node(self) -> LocalNode:
        """The node for a command that only reads: with the defaults when there is no config
        file yet, said in one line on stderr with what to run next."""
        from shadowclone.plugin.node import reading_node

        if self._node is None:
            try:
                node, defaults = reading_node(self.paths)
            except ConfigError as error:
                raise ConfigError(config_error_line(self.paths, error)) from None
            if defaults:
                click.echo(no_config_line(node.paths), err=True)
            self._node = node
        return self._node

    def use_node(self, node: LocalNode) -> None:
        """Go on with `node` (`status`, with the config serve keeps in force)."""
        self._node = node


def no_config_line(paths: Paths) -> str:
    return (
        f"shadowclone: no config file yet ({paths.config_file}): the defaults serve; "
        "run `shadowclone config init` to write one"
    )


def config_error_line(paths: Paths, error: ConfigError) -> str:
    """A config that does not load, and, while serve runs, the config serve keeps in force
    meanwhile (every command but `status` refuses it)."""
    from shadowclone.serve.following import held_line, served_config

    served = served_config(paths)
    return f"{error}; {held_line(served)}" if served is not None else str(error)


pass_app = click.make_pass_decorator(App)


def json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(function)


def emit_json(value: object) -> None:
    from shadowclone.node.schemas import CONVERTER

    data = CONVERTER.unstructure(value)
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def ago(when: datetime | None) -> str:
    if when is None:
        return "-"
    seconds = max(0, int((datetime.now(UTC) - when).total_seconds()))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def format_progress(line: ProgressLine) -> str:
    stamp = line.at.astimezone().strftime("%H:%M:%S")
    return f"{stamp}  {line.step:<9} {line.kind:<8} {line.words}"


def usage_line(view: CloneView) -> str:
    """Cost, tokens and turns so far, and how long the clone has run."""
    usage = view.usage
    cost = f"${usage.cost_usd:.4f}" if usage.cost_usd is not None else "cost not reported"
    turns = f"{view.turns} turn" + ("" if view.turns == 1 else "s")
    assert view.started_at is not None
    ran = (view.ended_at or datetime.now(UTC)) - view.started_at
    return (
        f"{cost}, {usage.input_tokens} tokens in, {usage.output_tokens} out, {turns}; "
        f"ran {duration(ran.total_seconds())}"
    )


def duration(seconds: float) -> str:
    """A span as an owner reads it: 42 s, 3 min 5 s, 2 h 10 min."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def describe(view: CloneView) -> str:
    from shadowclone.node.schemas import Caps

    rows = [
        f"clone     {view.id}  {view.state}"
        + ("  (stop requested)" if view.stop_requested and view.state.active else ""),
        f"target    {view.target.key}",
        f"engine    {view.engine}",
        f"requested {view.requested_at.astimezone():%Y-%m-%d %H:%M:%S} ({ago(view.requested_at)})",
    ]
    if view.waiting_for:
        rows.append(f"waiting   for {view.waiting_for}")
    if view.scheduled_until:
        rows.append(
            f"scheduled until {view.scheduled_until.astimezone():%Y-%m-%d %H:%M:%S}, when its "
            f"login's usage limit resets (go on now: shadowclone resume {view.id})"
        )
    if view.started_at:
        rows.append(f"started   {view.started_at.astimezone():%Y-%m-%d %H:%M:%S}")
    if view.ended_at:
        rows.append(f"ended     {view.ended_at.astimezone():%Y-%m-%d %H:%M:%S}")
    if view.started_at:
        rows.append(f"usage     {usage_line(view)}")
    if view.caps != Caps():
        rows.append(f"caps      {view.caps.describe()}")
    if view.question:
        q = view.question
        rows.append(f"question  {q.id}: {q.text}")
        rows.append(
            "          options: "
            + ", ".join(f"{o} (recommended)" if o == q.recommended else o for o in q.options)
        )
        rows.append(f"          answer: shadowclone answer {view.id} {q.id} CHOICE")
    if view.pr_url:
        rows.append(f"pull request {view.pr_url}")
    if view.reason:
        rows.append(f"reason    {view.reason}")
    if view.exit_code is not None:
        rows.append(f"exit code {view.exit_code}")
    if view.output_tail and not view.state.active:
        rows.append("last output:")
        rows.extend(f"  {line}" for line in view.output_tail.splitlines()[-10:])
    if view.last_progress:
        rows.append("progress:")
        rows.extend(f"  {format_progress(p)}" for p in view.last_progress)
    if view.report:
        rows.append("report:")
        rows.extend(f"  {line}" for line in view.report.splitlines())
    rows.extend(f"warning: {p}" for p in view.problems)
    return "\n".join(rows)
