"""The text of Compose files as the Compose specification reads it: YAML (bounded), variables
interpolated (`${NAME:-default}` and the rest), env files, and the forms of its values (a list or
a mapping of variables, a command line or a list, a duration)."""

from __future__ import annotations

import io
import posixpath
import re
import shlex
from collections.abc import Mapping
from typing import Any

import yaml
from dotenv import dotenv_values

from shadowclone.errors import BadInput

MAX_BYTES = 1024 * 1024
"""The largest Compose file read."""
MAX_NODES = 20_000
"""At most this many values in one file, aliases counted each time they are used."""
_VARIABLE = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def fail(where: str, expected: str) -> BadInput:
    return BadInput(f"{where}: expected {expected}")


def in_repository(where: str, folder: str, relative: object) -> str:
    if not isinstance(relative, str) or not relative.strip() or "\0" in relative:
        raise fail(where, "a non-empty path")
    if relative.startswith(("/", "~")):
        raise fail(where, "a path relative to its file's folder")
    joined = posixpath.normpath(posixpath.join(folder, relative))
    if joined == ".." or joined.startswith("../"):
        raise fail(where, "a path inside the repository")
    return joined


def load(path: str, text: str) -> dict[str, Any]:
    if len(text.encode("utf-8", "surrogateescape")) > MAX_BYTES:
        raise BadInput(f"{path}: over {MAX_BYTES // 1024} KiB: not a Compose file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise BadInput(f"{path}: not valid YAML{at} ({problem})") from None
    except RecursionError:
        raise BadInput(f"{path}: nested too deeply") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise fail(path, "a mapping with services")
    count(path, data, [0])
    return data


def count(path: str, value: object, seen: list[int]) -> None:
    """Refuse a file whose values, aliases expanded, are too many (an alias bomb)."""
    seen[0] += 1
    if seen[0] > MAX_NODES:
        raise BadInput(f"{path}: over {MAX_NODES} values (aliases counted where used)")
    if isinstance(value, dict):
        for key, item in value.items():
            count(path, key, seen)
            count(path, item, seen)
    elif isinstance(value, list):
        for item in value:
            count(path, item, seen)


def interpolate(text: str, variables: Mapping[str, str], where: str) -> str:
    """`text` with `$NAME`, `${NAME}` and `${NAME:-default}` (and `-`, `:?`, `?`, `:+`, `+`)
    replaced as Compose does; `$$` is one `$`. An unset variable is empty."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "$":
            out.append(char)
            index += 1
            continue
        following = text[index + 1 : index + 2]
        if following == "$":
            out.append("$")
            index += 2
        elif following == "{":
            value, index = _braced(text, index + 2, variables, where)
            out.append(value)
        else:
            found = _VARIABLE.match(text, index + 1)
            if found is None:
                raise BadInput(f"{where}: a $ that starts no variable (write $$ for a $)")
            out.append(variables.get(found.group(), ""))
            index = found.end()
    return "".join(out)


def _braced(text: str, start: int, variables: Mapping[str, str], where: str) -> tuple[str, int]:
    """The value of `${...}` whose name starts at `start`, and the index after its `}`."""
    found = _VARIABLE.match(text, start)
    if found is None:
        raise BadInput(f"{where}: expected a variable name after ${{")
    name, index = found.group(), found.end()
    operator = next(
        (op for op in (":-", ":?", ":+", "-", "?", "+") if text.startswith(op, index)), ""
    )
    index += len(operator)
    depth, begin = 1, index
    while index < len(text) and depth:
        if text.startswith("${", index):
            depth, index = depth + 1, index + 2
            continue
        if text[index] == "}":
            depth -= 1
        index += 1
    if depth:
        raise BadInput(f"{where}: a ${{ without its }}")
    argument = text[begin : index - 1]
    if not operator and argument:
        raise BadInput(f"{where}: expected }} after ${{{name}")
    value = variables.get(name)
    set_, non_empty = value is not None, bool(value)
    if operator in (":-", "-"):
        use_default = not non_empty if operator == ":-" else not set_
        return (interpolate(argument, variables, where) if use_default else value or ""), index
    if operator in (":?", "?"):
        if (operator == ":?" and not non_empty) or (operator == "?" and not set_):
            said = interpolate(argument, variables, where) or "required"
            raise BadInput(f"{where}: variable {name} is not set ({said})")
        return value or "", index
    if operator in (":+", "+"):
        use = non_empty if operator == ":+" else set_
        return (interpolate(argument, variables, where) if use else ""), index
    return value or "", index


def interpolated(value: Any, variables: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        return interpolate(value, variables, where)
    if isinstance(value, list):
        return [interpolated(item, variables, where) for item in value]
    if isinstance(value, dict):
        return {
            key: interpolated(item, variables, _within(where, key)) for key, item in value.items()
        }
    return value


def _within(where: str, key: object) -> str:
    """`FILE: a.b.KEY` from `FILE: a.b` (or `FILE`) and `KEY`."""
    return f"{where}.{key}" if ": " in where else f"{where}: {key}"


def dotenv(path: str, text: str) -> dict[str, str]:
    """The variables of an env file (`KEY=VALUE` lines, as Compose reads them)."""
    try:
        found = dotenv_values(stream=io.StringIO(text), interpolate=True)
    except ValueError as error:
        raise BadInput(f"{path}: not an env file ({error})") from None
    return {name: value for name, value in found.items() if value is not None}


# ------------------------------------------------------------------ one service, normalised


def string(where: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise fail(where, "a string")
    text = str(value)
    if "\0" in text:
        raise fail(where, "a string without NUL")
    return text


def table(where: str, value: object) -> dict[str, str | None]:
    """Compose's "list or dict": `["K=V", "K"]` or `{K: V}` (a bare K: unset)."""
    table: dict[str, str | None] = {}
    if isinstance(value, list):
        for index, item in enumerate(value):
            name, equals, text = string(f"{where}[{index}]", item).partition("=")
            table[name] = text if equals else None
    elif isinstance(value, dict):
        for name, item in value.items():
            # YAML's true and false, as Compose passes them on
            written = str(item).lower() if isinstance(item, bool) else item
            table[str(name)] = None if written is None else string(f"{where}.{name}", written)
    elif value is not None:
        raise fail(where, "a list of NAME=VALUE or a mapping")
    for name in table:
        if not name or any(char in name for char in "=\0\n"):
            raise fail(f"{where}.{name}", "a variable name (no =, on one line)")
    return table


def argv(where: str, value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as error:
            raise fail(where, f"a command line ({error})") from None
    if isinstance(value, list):
        return [string(f"{where}[{index}]", item) for index, item in enumerate(value)]
    raise fail(where, "a command line or a list of strings")


def duration(where: str, value: object) -> float | None:
    if value is None:
        return None
    text = string(where, value)
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise fail(where, "a duration such as 30s or 1m30s")
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)
