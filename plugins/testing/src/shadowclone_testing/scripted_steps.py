"""The scripted engine's steps: what a script is, how it is read from JSON and written back,
the default script, and the failure a step can end the session with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from shadowclone.errors import BadInput

SCRIPT_VARIABLE = "SHADOWCLONE_SCRIPT"
"""A JSON list of steps, or the path of a JSON file holding one."""


def _text(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(f"`{attribute.name}` must be a string, not {value!r}")


def _seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"`{attribute.name}` must be a number of seconds, not {value!r}")


def _options(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(option, str) for option in value):
        raise ValueError(f"`{attribute.name}` must be a list of strings, not {value!r}")


def _as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen
class Say:
    """Say something to the owner: a TextEvent."""

    text: str = attrs.field(validator=_text)


@attrs.frozen
class Write:
    """Write a file in the workspace (its path relative to it): a ToolUseEvent `write`."""

    path: str = attrs.field(validator=_text)
    content: str = attrs.field(validator=_text)


@attrs.frozen
class Run:
    """Run a shell command in the workspace: a ToolUseEvent `shell`, then its output."""

    command: str = attrs.field(validator=_text)


@attrs.frozen
class Ask:
    """Ask the owner through the ask server; the choice is `{answer}` from then on."""

    question: str = attrs.field(validator=_text)
    options: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=_options)
    recommended: str = attrs.field(validator=_text)


@attrs.frozen
class WaitForMessage:
    """Wait up to `timeout_s` for a message from the owner, and handle it."""

    timeout_s: float = attrs.field(default=60.0, validator=_seconds)


@attrs.frozen
class Sleep:
    seconds: float = attrs.field(validator=_seconds)


@attrs.frozen
class Fail:
    """Crash: the session ends FAILED with `message` as its detail."""

    message: str = attrs.field(validator=_text)


Step = Say | Write | Run | Ask | WaitForMessage | Sleep | Fail

STEP_KINDS: Mapping[str, type[Step]] = {
    "say": Say,
    "write": Write,
    "run": Run,
    "ask": Ask,
    "wait_for_message": WaitForMessage,
    "sleep": Sleep,
    "fail": Fail,
}
"""The key that names each step in JSON; its value is the step's first field."""

_KIND_OF: Mapping[type[Step], str] = {kind: name for name, kind in STEP_KINDS.items()}


def parse_script(data: object) -> tuple[Step, ...]:
    """The steps of a script in its JSON form, or `ValueError` naming the step at fault."""
    if not isinstance(data, list):
        raise ValueError(f"a script is a list of steps, not {type(data).__name__}")
    return tuple(_parse_step(number, item) for number, item in enumerate(data, 1))


def _parse_step(number: int, item: object) -> Step:
    if not isinstance(item, dict):
        raise ValueError(f"step {number} is not an object: {item!r}")
    named = [key for key in item if key in STEP_KINDS]
    if len(named) != 1:
        raise ValueError(
            f"step {number} must name exactly one of {', '.join(STEP_KINDS)}: {item!r}"
        )
    [name] = named
    kind = STEP_KINDS[name]
    first, *rest = attrs.fields(kind)
    unknown = set(item) - {name} - {field.name for field in rest}
    if unknown:
        raise ValueError(f"step {number} ({name}) has unknown keys: {', '.join(sorted(unknown))}")
    arguments = {first.name: item[name], **{key: item[key] for key in item if key != name}}
    try:
        return kind(**arguments)
    except (TypeError, ValueError) as error:
        raise ValueError(f"step {number} ({name}): {error}") from None


def script_json(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The JSON form of `steps`, as `SHADOWCLONE_SCRIPT` takes it (`json.dumps` it)."""
    documents = []
    for step in steps:
        first, *rest = attrs.fields(type(step))
        document: dict[str, Any] = {_KIND_OF[type(step)]: getattr(step, first.name)}
        for field in rest:
            value = getattr(step, field.name)
            document[field.name] = list(value) if isinstance(value, tuple) else value
        documents.append(document)
    return documents


def script_from(env: Mapping[str, str]) -> tuple[Step, ...] | None:
    """The script `SHADOWCLONE_SCRIPT` in `env` gives, None without one; `BadInput` if it
    cannot be read."""
    value = env.get(SCRIPT_VARIABLE, "").strip()
    if not value:
        return None
    where = SCRIPT_VARIABLE
    try:
        if value.startswith("["):
            data = json.loads(value)
        else:
            where = f"{SCRIPT_VARIABLE}={value}"
            data = json.loads(Path(value).read_text(encoding="utf-8"))
        return parse_script(data)
    except (OSError, ValueError) as error:
        raise BadInput(f"{where}: not a script for the scripted engine: {error}") from None


REVIEW_MARK = "(shadowclone self-review)"
"""In the prompt of the self-review stage's session: there the default script only approves."""


def default_script(prompt: str) -> tuple[Step, ...]:
    """The script played when none is given: read the issue, write a greeting, ask the owner
    which style it should have, rewrite it so, and say it is done. Asked to review a change,
    it approves it."""
    if REVIEW_MARK in prompt:
        return (Say("PASS: the change does what the issue asks."),)
    issue = first_line(prompt) or "the task"
    return (
        Say(f"I read the issue: {issue}"),
        Write("GREETING.md", f"# Greeting\n\nHello! This greeting answers: {issue}\n"),
        Ask(
            "Which greeting style should GREETING.md use?",
            ("formal", "friendly"),
            "friendly",
        ),
        Write(
            "GREETING.md",
            f"# Greeting\n\nHello, in a {{answer}} style! This greeting answers: {issue}\n",
        ),
        Say("Done: GREETING.md now holds a {answer} greeting."),
    )


def first_line(text: str, limit: int = 200) -> str:
    """The first line of `text` with words in it, without a Markdown heading's marks."""
    for line in text.splitlines():
        words = line.strip().lstrip("#").strip()
        if words:
            return words[:limit]
    return ""


class ScriptFailed(Exception):
    """The script ends the session FAILED; `str()` is the FinishedEvent's detail."""
